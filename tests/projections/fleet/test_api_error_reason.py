"""An API error that ended the turn (hook StopFailure: goal.json stop_error) is said in the reason
of the idle agent; seen on the real client in tests/watcher/hook/test_realclient_steps.py."""
from projections.fleet.machine import classify
from projections.observations import AgentObs

NOW = 1_800_000_000.0


def test_the_reason_names_the_api_error_until_a_later_state_clears_it():
    obs = AgentObs(agent="a1", source="fleet", state="idle", contract_sha256="c", last_activity=NOW - 5,
                   stop_error="server_error")
    assert str(classify(obs, NOW, 900.0)[1]) == "idle after an API error: server_error"
    assert classify(obs, NOW, 900.0)[0].name == "TRABAJANDO"
    assert classify(AgentObs(agent="a1", source="fleet", state="idle", contract_sha256="c", last_activity=NOW - 5),
                    NOW, 900.0)[1] == "idle within stall_after"
    busy = AgentObs(agent="a1", source="fleet", state="busy", contract_sha256="c", last_activity=NOW, stop_error="x")
    assert classify(busy, NOW, 900.0)[1] == "busy"
