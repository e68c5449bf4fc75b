"""Training: one run from a composed config to a run dir (:mod:`.run`), the LightningModule that trains any
tagger (:mod:`.lightning_module`), tail weight averaging (:mod:`.averaging`) and starting from a trained tagger
(:mod:`.transfer`). ``python -m tagger.train`` is the Hydra entry point."""
