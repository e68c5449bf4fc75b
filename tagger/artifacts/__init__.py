"""Saved models: checkpoints (:mod:`.checkpoint`, with :class:`~tagger.artifacts.checkpoint.LoadedModel`, the record
of a loaded tagger), packaged models in the BentoML store (:mod:`.package_format`: the folder and its check;
:mod:`.package`: writing one; :mod:`.packaged`: reading one back), what a command-line argument names (:mod:`.runs`:
run dir, ``best.json``, ``.ckpt`` or store tag, and the best run of a task) and provenance (:mod:`.provenance`)."""
