"""From gated artifacts to a running API: publish, sign, roll back, the bucket, the deploy command, the smoke test."""
