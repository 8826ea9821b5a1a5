"""Checkpoints in upstream Laya's layout: made offline (kinds, random weights), resolved (local, hub), the demo."""
