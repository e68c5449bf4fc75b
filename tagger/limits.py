"""How much one forward pass of a predictor holds, in a module that imports nothing: the predictor, the Python API,
the CLIs and the service read the same defaults, and the service's entry process and ``import tagger`` stay light."""

BATCH_SIZE = 256  # windows (sentences, or pieces of long ones) per forward pass
MAX_TOKENS = 2048  # padded token positions per forward pass
STREAMS = 2  # forward passes a predictor runs side by side (tagger.streams), at most one per intra-op thread
