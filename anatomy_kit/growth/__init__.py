"""Growing a trained model: wider residual streams (SRIO, chapter 6) and phased, importance-driven
training (Growth Transformer training, chapter 3)."""
