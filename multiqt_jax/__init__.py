"""MultiQT: multimodal real-time question and symptom tracking in streaming calls."""
