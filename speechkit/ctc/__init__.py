"""A streaming character CTC recogniser in JAX: `symbols` (its 30 output symbols),
`model` (`CtcRecogniser`, `CtcConfig`), `decode` (greedy causal decoding with each
character's and word's emission time, error rates), `beam` (a causal prefix beam search
with a word n-gram model) and `train` (loss and train step)."""
