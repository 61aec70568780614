"""The one table of schedules: which Config values can be scheduled (`SCHEDULED`: the value's field -> the field
naming its schedule) and the schedules a field can name (`SCHEDULES`: name -> what it does). Validation, the other
libraries' spellings (RL-Zoo's `lin_<value>`), the help text and every runner read these; the formula of each
schedule is `kppo.update.schedules.progress_factor`, the one function a new schedule adds a line to."""

from __future__ import annotations

__all__ = ["SCHEDULED", "SCHEDULES", "ZOO_PREFIXES"]

#: Config field -> the Config field naming its schedule.
SCHEDULED = {"learning_rate": "lr_schedule", "clip_range": "clip_schedule", "ent_coef": "ent_schedule"}

#: Schedule name -> what it does to the scheduled value over the run.
SCHEDULES = {
    "constant": "keeps the value",
    "linear": "anneals it linearly to 0 over the run (RL-Zoo's lin_<value>, SB3's LinearSchedule to 0)",
}

#: RL-Zoo's spelling of a scheduled value (`lin_2.5e-4`): its prefix -> the schedule it names.
ZOO_PREFIXES = {"lin_": "linear"}
