"""How much one forward pass of a predictor holds, in a module that imports nothing: the predictor, the Python API,
the CLIs and the service read the same defaults, and the service's entry process and ``import tagger`` stay light."""

BATCH_SIZE = 256  # windows (sentences, or pieces of long ones) per forward pass
MAX_TOKENS = 2048  # padded token positions per forward pass
# what one more forward pass costs, in padded token positions: a call is cut into another pass where that saves more
# padding (tagger.inference.passes). A pass has a fixed cost besides its positions; passes on two streams overlap, so
# half of that fixed cost, in positions (the figures: docs/reference.md, "What the predictor does for speed").
PASS_COST = 64
# forward passes a predictor runs side by side (tagger.inference.pass_threads), at most one per intra-op thread
STREAMS = 2
