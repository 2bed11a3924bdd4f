"""CS-KWS: anchor-free keyword detection in continuous speech (AF-KWS)."""
