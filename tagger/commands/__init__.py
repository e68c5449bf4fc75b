"""The user commands other than ``train`` (:mod:`tagger.train`) and ``report`` (:mod:`tagger.report`):
``tagger evaluate``, ``predict``, ``package``, ``export`` and ``serve``, one module each with its ``main(argv)``
(``tagger SUBCOMMAND`` is :mod:`tagger.cli`). Each reads its arguments and calls the layers below; the Python API
and the service call the same predictor, loading and scoring code."""
