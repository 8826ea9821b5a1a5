"""The gate corpus and its golden rows, recorded with upstream laya on PyTorch CPU FP32."""
