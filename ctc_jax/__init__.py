"""The streaming character CTC recogniser in JAX, MultiQT's text modality: `symbols`
(its 30 output symbols), `model` (`CtcRecogniser`, `CtcConfig`), `decode` (greedy causal
decoding with each character's and word's emission time, error rates), `beam` (a causal
prefix beam search with a word n-gram model), `train` (loss and train step), `bundle`
(the recogniser saved as data; `bundle.SHIPPED`, models/quick) and `recognise` (over
many recordings, its outputs cached). Its corpora are `datasets.recogniser_text` and
the TFDS builder `datasets.recogniser_speech`."""
