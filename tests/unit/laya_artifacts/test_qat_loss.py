"""The fine-tune's loss reads what the gate reads: a row's largest error, not only the mean."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from laya_artifacts.qat.finetune import QatSettings, _Example, _loss  # noqa: E402


def _example(teacher_p: list[list[float]]) -> _Example:
    p = torch.tensor(teacher_p)
    rows = p.shape[0]
    act = torch.full((rows, 3), 1 / 3)
    batch = {"marker_mask": torch.ones_like(p, dtype=torch.bool)}
    return _Example("case", "selection", batch, torch.ones(rows, 1), p, act, rows)


def _outputs(p: list[list[float]], act: torch.Tensor) -> tuple[torch.Tensor, ...]:
    probabilities = torch.tensor(p)
    return probabilities, act, probabilities.log(), act.log()


def test_the_gradient_goes_to_the_rows_past_the_band() -> None:
    """Rows already within the band stop pulling; a row far from the teacher gets most of the gradient."""
    example = _example([[0.5, 0.5]] * 2)

    def gradients(*band: float) -> torch.Tensor:
        p = torch.tensor([[0.58, 0.42], [0.503, 0.497]], requires_grad=True)  # one row far, one within 0.005
        act = example.teacher_act.clone()
        _loss((p, act, p.log(), act.log()), example, *band).backward()
        assert p.grad is not None
        return p.grad.abs().amax(-1)

    plain, banded = gradients(), gradients(*(lambda s: (s.band, s.band_weight))(QatSettings()))
    assert banded[1] == pytest.approx(float(plain[1]))  # the row within the band: unchanged
    assert banded[0] / banded[1] > 10 * (plain[0] / plain[1])  # the far row: far more of the pull


def test_differences_inside_the_band_add_nothing() -> None:
    example = _example([[0.5, 0.5]] * 2)
    inside = _outputs([[0.503, 0.497]] * 2, example.teacher_act.clone())
    assert float(_loss(inside, example, 0.005, 100.0)) == pytest.approx(float(_loss(inside, example)))


def test_the_band_is_part_of_the_recipe() -> None:
    """A state saved under another band is another recipe: `--resume` refuses it, a finished copy is not reused."""
    assert QatSettings(band=0.01).recipe() != QatSettings().recipe()
    assert {"band", "band_weight"} <= set(QatSettings().recipe())
