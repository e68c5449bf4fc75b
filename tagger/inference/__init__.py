"""Inference: tagging with a trained tagger, in process. The :class:`~tagger.inference.predictor.Predictor`
(windows, documents, batches within a token budget) runs on a backend (:mod:`.backends`: torch fp32, bf16, int8,
ONNX Runtime), its passes planned by :mod:`.passes` and run side by side on :mod:`.pass_threads`; :mod:`.scoring`
tags a labelled split and scores it. The predictor and its backends import neither Lightning nor Hydra: the
service runs them without the training stack."""
