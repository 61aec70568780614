"""What `kppo eval` and `kppo export` read besides a finished run's agent/: a run that stopped before writing agent/
(its newest readable checkpoint) and a zip Stable-Baselines3 saved (with its vec_normalize.pkl)."""

from __future__ import annotations

from pathlib import Path


def is_unfinished_run(path: Path) -> bool:
    """A run directory without agent/ (interrupted or killed) whose checkpoints `load_run_checkpoint` reads."""
    return (
        path.is_dir()
        and not (path / "agent").is_dir()
        and not (path / "metadata.json").is_file()
        and (path / "config.yaml").is_file()
        and (path / "checkpoints").is_dir()
    )


def load_unfinished_run(path: Path):
    """The agent of the run's newest readable checkpoint, saying which one on stdout."""
    from kppo.training.resume import load_run_checkpoint

    saved = load_run_checkpoint(path)
    meta = saved.metadata
    state = "the run did not finish" if meta["iteration"] < meta["num_iterations"] else "the run wrote no agent/"
    print(f"using checkpoint {meta['checkpoint']} (iteration {meta['iteration']} of {meta['num_iterations']}; {state})")
    return saved


def sb3_model(path: Path, vecnormalize: str | None):
    """The kppo model of a zip Stable-Baselines3 saved (its class from the save), with `vecnormalize`'s statistics
    frozen in; None for anything else."""
    import kppo
    from kppo.sb3.saves.sb3_save import is_sb3_save, read_sb3_save

    if not is_sb3_save(path):
        return None
    model = getattr(kppo, read_sb3_save(path).algorithm).load(path)
    if vecnormalize:
        model.use_vec_normalize(vecnormalize)
    return model
