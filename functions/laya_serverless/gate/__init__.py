"""The parity gate's torch-free half, shipped in every function: the replay of golden rows against an artifact
(`replay`), the corpus schema it reads (`splits`) and the deploy-time re-gate handler (`regate`)."""
