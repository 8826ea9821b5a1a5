"""Build side: turn upstream Laya checkpoints into verified, serverless-ready artifacts."""
