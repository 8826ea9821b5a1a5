"""Quantization-aware fine-tuning: a copy of a checkpoint taught to answer as the original under int8."""
