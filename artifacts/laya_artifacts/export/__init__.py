"""From a checkpoint to ONNX graphs: the FP32 export, fused attention, the CUDA targets' graphs."""
