"""``[notify]`` -> ``Policy`` (watcher/runtime/notifier.py): every key the Policy holds under the
same name is copied by name, so a new notify option is its config key, its Policy field and the
stage that reads it; the config's defaults are the Policy's."""
from __future__ import annotations

import msgspec

from projections.notify.policy import Policy
from watcher import config
from watcher.runtime.notifier import _DERIVED, policy_from_config, same_named

NUDGE = {"nudge_enabled", "nudge_max", "nudge_after", "nudge_gap", "nudge_needs_target"}


def test_every_policy_field_comes_from_a_key():
    cfg = config.parse('[notify]\nurls = ["json://localhost"]\n')
    fields = {f.name for f in msgspec.structs.fields(Policy)}
    assert fields == set(same_named(cfg)) | _DERIVED | NUDGE


def test_the_configs_defaults_are_the_policys():
    cfg = config.parse('[notify]\nurls = ["json://localhost"]\n')
    got, want = policy_from_config(cfg), Policy()
    for k in same_named(cfg):
        assert getattr(got, k) == getattr(want, k), k


def test_set_keys_reach_the_policy_durations_in_seconds():
    cfg = config.parse('[notify]\nurls = ["json://localhost"]\ngroup_wait = "7s"\nrepeat_interval = "1h"\n'
                       'min_severity = "urgent"\nflap_high = 60.0\nsend_resolved = true\nquiet_urgent = false\n')
    p = policy_from_config(cfg)
    assert (p.group_wait, p.repeat_interval, p.min_severity, p.flap_high, p.send_resolved, p.quiet_urgent) == \
        (7.0, 3600.0, "urgent", 60.0, True, False)
