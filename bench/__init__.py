"""Speed and load tools, run from a checkout and not installed with the package: :mod:`bench.backends`
(``make bench``: the inference backends and spaCy peers), :mod:`bench.families` (``make bench-families``: each model
family's inference, training and HTTP speed) and :mod:`bench.loadgen` (the closed-loop HTTP load generator of
``make soak`` and both benches)."""
