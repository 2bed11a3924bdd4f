"""Task-agnostic speech tooling shared by MultiQT and CS-KWS (front end, TTS, ASR, channel)."""
