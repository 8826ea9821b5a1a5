"""The research that produced the shipped demo head: generator, training loop, evaluation, baselines.

Never imported by the pipeline (`laya_artifacts`); it imports `laya_artifacts.checkpoints.demo` for the model helpers.
"""
