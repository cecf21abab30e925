"""The mutation gate (``make mutation``): does the suite notice when the pure core is wrong?

For each module of ``MODULES`` every mutation site is found with ``ast`` (the operators below),
and each mutant is applied, one at a time, to a private copy of one snapshot of the checkout (the
working tree, or ``--rev`` a commit; never the tree itself, so editing while it runs is safe).

Which tests: line coverage per test is measured once on the unmutated snapshot (coverage.py, a
context per test, `fleetwatch run` subprocesses included; fw_mutation_plugin.py), and each mutant
runs only the module's tests (``MODULES[m]``) that ran its line, stopping at the first failure.
A line run at import or collection runs every test of the module; a line no test runs is not run
at all and counts as a survivor. The unmutated tests must pass first (else every mutant would
look killed). Runs go through zygote.py (pytest and Hypothesis imported once per job).

A mutant is *killed* when a test fails or its run times out (8 times its tests' own time, at least
90 s), *survives* when they all pass; any other ending (a usage error, pytest's own crash) is
printed and counts as survived. The score per module is killed / (mutants not listed in
EQUIVALENT); ``--min`` (default 90) is the gate: exit 1 below it.

Operators (each occurrence is one mutant):
- ``cmp``: ``<``↔``<=``, ``>``↔``>=``, ``==``↔``!=``, ``in``↔``not in``, ``is``↔``is not``
- ``bool``: ``and``↔``or``; ``not x`` → ``x``
- ``num``: an integer constant n → n + 1 (off by one); a float x → x * 2
- ``cls``: a class name string ("RECLAMA" …) → another class (a renamed class)
- ``branch``: the body of an ``if`` without ``else`` → ``pass`` (a dropped branch)
- ``call``: ``min``↔``max``, ``re.fullmatch``↔``re.match``, ``any``↔``all``
- ``ret``: ``return <expr>`` of a bool-returning comparison → ``return not (<expr>)``

Usage: ``python tests/mutation/mutate.py [--module projections.fleet.fold ...] [--max N] [--jobs J]
[--rev HEAD] [--line N ...] [--min 90] [-v] [--list]``. ``--max`` samples N mutants per module
(spread over the file); ``--line`` re-checks the mutants of some lines; ``-v`` prints which test
killed each mutant. Survivors are printed with their line and label, so a test can be written that
pins the rule they break (tests/test_rules_mutants_<module>.py) or, when nothing observable
changes, an entry added to EQUIVALENT with its reason. The README's development section has the
last full scores.
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import copy
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ("RECLAMA", "DICE_TERMINADO", "ESTANCADO", "TRABAJANDO", "MAL_LANZADO", "CERRADO")

# module -> the tests that own its rules (fast ones: a mutant run must take seconds)
MODULES: dict[str, list[str]] = {
    "projections.fleet.fold": ["tests/projections/fleet/test_core_rules.py", "tests/projections/fleet/test_fleet.py", "tests/projections/fleet/test_fleet_updates.py",
                          "tests/watcher/runtime/test_watcher.py", "tests/watcher/runtime/test_first_tick.py", "tests/repo/test_rules_table.py",
                          "tests/projections/test_bounds_fleet.py", "tests/projections/test_bounds_property.py", "tests/projections/fleet/test_busy_silence.py",
                          "tests/projections/fleet/test_rules_mutants_fleet.py", "tests/projections/fleet/test_change_hint.py",
                          "tests/projections/fleet/test_stale_reason.py"],
    "projections.fleet.machine": ["tests/projections/fleet/test_core_rules.py", "tests/projections/fleet/test_fleet.py", "tests/repo/test_rules_table.py",
                            "tests/projections/fleet/test_busy_silence.py", "tests/projections/fleet/test_rules_mutants_fleet.py",
                            "tests/repo/test_classes_table.py"],
    "projections.notify.plan": ["tests/projections/notify/test_core_rules_notify.py", "tests/projections/notify/test_notify_plan.py",
                                "tests/watcher/web/test_phone_loop.py", "tests/watcher/runtime/test_notify_e2e.py", "tests/projections/notify/test_bounds_notify.py",
                                "tests/projections/notify/test_rules_mutants_notify_plan.py"],
    "projections.notify.flap": ["tests/projections/notify/test_notify_flap.py", "tests/projections/notify/test_notify_plan.py",
                                "tests/projections/notify/test_rules_mutants_notify_flap.py"],
    "projections.dod.fold": ["tests/projections/dod/test_dod_read_side.py", "tests/projections/dod/test_dod.py", "tests/projections/fleet/test_core_rules.py",
                        "tests/repo/test_rules_table.py", "tests/watcher/runtime/test_dod_checker.py", "tests/watcher/cli/test_status_cli.py",
                        "tests/watcher/runtime/test_rebuild_batches.py", "tests/watcher/runtime/test_first_tick.py"],
    "projections.runs.rules": ["tests/projections/fleet/test_core_rules.py", "tests/projections/runs/test_runs_rules.py", "tests/projections/runs/test_runs.py",
                               "tests/repo/test_rules_table.py", "tests/projections/runs/test_runs_memo.py",
                               "tests/projections/runs/test_rules_mutants_runs_rules.py"],
}

# Equivalent mutants: no observable change, so no test can kill them; excluded from the score.
# module -> {(the mutated line's code, stripped, comment cut, "op what"): why}; keyed by code, not line number,
# so edits elsewhere in the module do not move them. Keep the list short, each reason checkable.
_MEMO = ("memo check: can only recompute (the fold appends increasing seqs, so a list object's "
         "length, first and last seq identify its content); the result is the same")
_FLAP_MEMO_LINE = "if m is not None and m[0] is flat and m[1] == len(flat) and m[2] == flat[2] and m[3] == flat[-1]:"
_FRESH_GEN = "a fresh memo's gen: its place is None, so the hint never applies whatever gen it holds"
_FRESH_N = "a fresh memo's agent count: -1 and -2 both never equal len(agents)"
_COPY = "the copy keeps the replaced memo's list as it was: the watcher never uses a memo it replaced"
_TIE = ("a tie-break rank between a verdict, a self-approval and a claim: each comes from its own event, so "
        "their seqs never tie and the rank is never compared")
EQUIVALENT: dict[str, dict[tuple[str, str], str]] = {
    "projections.dod.fold": {
        ('"claim_seq": 0, "claim_since": None, "claim_flagged": False,', "num 0->1"):
            "a new record's claim_seq is read only for a DICE_TERMINADO agent, whose claim_seq _classified set",
        ("gen: int = -1", "num 1->2"): _FRESH_GEN,
        ("n_state: int = -1", "num 1->2"): _FRESH_N,
        ('"self_key": None, "self_seq": 0, "self_at": None, "self_detail": "",', "num 0->1"):
            "self_seq is read only once self_key is set, and _flagged sets both",
        ("vals = list(vals) if vals is memo.vals else vals", "cmp Is->IsNot #0"): _COPY,
        ("sigs = list(sigs) if sigs is memo.sigs else sigs", "cmp Is->IsNot #0"): _COPY,
        ('if dirty is None or index is None or memo.gen != getattr(snap, "gen", 0) - 1 \\', "num 0->1"):
            "every Snapshot has a gen (0 by default): getattr's default is never used",
        ('_NO_AGENT = {"contract_sha256": None, "contract_changes": 0, "current_sha256": None, "self_key": None,',
         "num 0->1"): "the placeholder sig of an unknown agent: it only makes that agent be looked at once more",
        ('if v is not None and v["seq"] >= a["claim_seq"]:', "cmp GtE->Gt #0"):
            "a verdict and the claim are two events: their seqs are never equal",
        ('again=frozenset(again), gen=getattr(snap, "gen", 0), n_state=len(agents))', "num 0->1"):
            "every Snapshot has a gen (0 by default): getattr's default is never used",
        ('cands.append((v["seq"], 2, v["verdict"] if v["verdict"] in VERDICTS else Status.PENDING))',
         "num 2->3"): _TIE,
        ('cands.append((a["self_seq"], 1, Status.SELF_APPROVED))', "num 1->2"): _TIE,
        ('cands.append((a["claim_seq"], 0, Status.CLAIMED))', "num 0->1"): _TIE,
        ('cands.append((c["seq"], 0, Status.CLAIMED))', "num 0->1"): _TIE,
        ('if a["class"] == DICE_TERMINADO and a["claim_seq"]:', "bool and->or"):
            "claim_seq is non-zero exactly while the class is DICE_TERMINADO (_classified sets and resets it)",
        ('if c is not None and c["verdict"] == Status.MET and (a["verdict"] is None or '
         'a["verdict"]["seq"] < c["seq"]):', "cmp Lt->LtE #0"):
            "the file's claim and a verdict are two events: their seqs are never equal",
    },
    "projections.notify.flap": {
        **{(_FLAP_MEMO_LINE, w): _MEMO for w in (
            "branch body->pass", "cmp Is->IsNot #0", "num 0->1", "cmp Eq->NotEq #0", "cmp Eq->NotEq #0 (2)",
            "cmp Eq->NotEq #0 (3)", "num 1->2", "num 1->2 (2)", "num 2->3", "num 2->3 (2)", "num 3->4")},
        ("m = self.by_subject[subject] = [flat, len(flat), flat[2], flat[-1], _entries(flat), {}]", "num 1->2"): _MEMO,
        ("m = self.by_subject[subject] = [flat, len(flat), flat[2], flat[-1], _entries(flat), {}]", "num 2->3"): _MEMO,
        ("if len(self.by_subject) >= self.MAX:", "cmp GtE->Gt #0"): "memo size bound off by one: a cache, never a result",
        ("MAX = 8192", "num 8192->8193"): "memo size bound off by one: a cache, never a result",
        ("HIST_KEEP = 2 * HIST_N - 1", "num 2->3"): "62 entries kept instead of 41: the last 21 percents read only the last 41 (memory, not a result)",
        ("pct = hist[-1][3] if hist[0][1] >= now - FLAP_WINDOW else flap_percent(hist, now)", "cmp GtE->Gt #0"):
            "at the window's edge the recomputed percent counts the same transitions as the stored one",
        ("if e[3] < policy.flap_low and (last_low is None or e[1] > last_low):", "cmp Gt->GtE #0"):
            "the latest low time: on equal times both keep the same value",
        ("pct = hist[-1][3] if hist[0][1] >= now - FLAP_WINDOW else flap_percent(hist, now)", "num 0->1"):
            "hist[1] within the window means every transition is too: the stored percent equals the recomputed one",
        ("pct = hist[-1][3] if hist[0][1] >= now - FLAP_WINDOW else flap_percent(hist, now)", "num 1->2 (2)"):
            "hist[0][2] (a seq) is never within the window: always recomputed, same value",
    },
    "projections.notify.plan": {
        ('if SEV_RANK.get(c["sev"], 0) < SEV_RANK.get(policy.min_severity, 1):', "num 0->1"):
            "every condition's sev is one of SEVERITIES (notify.py's _new calls: classes.SEVERITY or a literal)",
        ('if SEV_RANK.get(c["sev"], 0) < SEV_RANK.get(policy.min_severity, 1):', "num 1->2"):
            "the default rank of an unknown min_severity: the config accepts only info|warning|urgent",
        ('return (DedupeReason.UPDATE_WAIT if now < due else DedupeReason.UPDATE_DUE), due, 1', "cmp Lt->LtE #0"):
            "now carries +1 ms (EPS): now == due only at a sub-millisecond instant event times never hold",
        ('return (DedupeReason.ALREADY_SENT if now < snoozed else DedupeReason.REPEAT_DUE), snoozed, 1',
         "cmp Lt->LtE #0"):
            "now carries +1 ms (EPS): now == the snooze end only at a sub-millisecond instant",
        ('due = max(c["changed"], (c["sent_at"] or 0.0) + policy.group_interval)', "num 0.0->1.0"):
            "a pushed condition (sent_rev >= 0) always has sent_at: the fold sets both from notice.sent",
        ('due = (c["sent_at"] or 0.0) + policy.repeat_interval', "num 0.0->1.0"):
            "a pushed condition (sent_rev >= 0) always has sent_at: the fold sets both from notice.sent",
        ('return "after quiet hours: " if any(it.c.get("held") is not None and (it.c["sent_at"] or 0.0) < it.c["held"]',
         "cmp Lt->LtE #0"):
            "a push at the very millisecond its item was held cannot happen: held means not pushed that tick",
        ("return DedupeReason.ALREADY_SENT, None, 1", "num 1->2"): "the attempt of a notice that is not sent",
        ("future = [w for w in run.wakes + gwakes if w > now]", "cmp Gt->GtE #0"):
            "now carries +1 ms (EPS): a wake time equal to it only at a sub-millisecond instant",
        ("if not policy.nudge_enabled:", "branch body->pass"):  # both lines: nudges() and nudge_decision()
            "two guards, nudges() and nudge_decision() (called by nudges() only): either one alone stops every nudge",
        ("if now < flush:", "cmp Lt->LtE #0"):
            "now carries +1 ms (EPS): now == the group's flush time only at a sub-millisecond instant",
        ('decisions += [Decision(it.cid, "group", GroupReason.SEND if ready[it.cid][0] <= now', "cmp LtE->Lt #0"):
            "SEND vs RIDE_ALONG: the item goes in the same batch either way, only the debug reason differs",
        ('return "after quiet hours: " if any(it.c.get("held") is not None and (it.c["sent_at"] or 0.0) < it.c["held"]',
         "num 0.0->1.0"): "held times are epochs: 0.0 and 1.0 are both before them",
        ("return (a, GroupReason.WAIT_GROUP) if a >= b else (b, GroupReason.WAIT_INTERVAL)", "cmp GtE->Gt #0"):
            "at a == b both give the same time; only the name of the debug reason differs",
    },
    "projections.runs.rules": {
        ("if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e11:",
         "num 0->1"): "epochs in [0, 1) (the first second of 1970) are no step time either way",
        ("if key >= ours:", "cmp GtE->Gt #0"): "key == ours is this run's own intent, skipped either way",
        ('f"{(ev - lf) / 60:.1f} min after failure {n}; {wait / 60:.0f} min required")', "num 60->61 (2)"):
            "the wait is 600 or 1200 s (failures 1, 2): /61 rounds to the same 10 and 20 min",
        ('if rs is not None and key in rs["violations"]:', "branch body->pass"):
            "an early return: runs._violations drops a key the run's violations hold all the same",
    },
    "projections.fleet.fold": {
        ("every = PRUNE_EVERY if n <= PRUNE_EVERY else 1 << (n - 1).bit_length()", "cmp LtE->Lt #0"):
            "at n == 512 both branches give 512",
        ("while t - la >= stall_after:", "cmp GtE->Gt #0"):
            "hi one ulp on (the first instant of the next class), still exclusive: only instants of the class skipped",
    },
}

_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_CALLS = {"min": "max", "max": "min", "any": "all", "all": "any", "fullmatch": "match", "match": "fullmatch"}


class Site:
    def __init__(self, op: str, line: int, what: str, index: int):
        self.op, self.line, self.what, self.index = op, line, what, index

    def __repr__(self) -> str:
        return f"{self.op}@{self.line}: {self.what}"


def code_lines(text: str) -> list[str]:
    """The module's lines without their comments (the keys of EQUIVALENT: a comment edit keeps them)."""
    import io
    import tokenize
    lines = text.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            r, c = tok.start
            lines[r - 1] = lines[r - 1][:c]
    return lines


def _docstring_ids(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def sites(tree: ast.AST) -> list[tuple[str, ast.AST, str]]:
    """(operator, node, description) for every mutation site, in a stable order."""
    docs = _docstring_ids(tree)
    found: list[tuple[str, ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _CMP:
                    found.append(("cmp", node, f"{type(op).__name__}->{_CMP[type(op)].__name__} #{i}"))
        elif isinstance(node, ast.BoolOp):
            found.append(("bool", node, "and->or" if isinstance(node.op, ast.And) else "or->and"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            found.append(("bool", node, "drop not"))
        elif isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            if type(v) is int and not isinstance(v, bool):
                found.append(("num", node, f"{v}->{v + 1}"))
            elif type(v) is float:
                found.append(("num", node, f"{v}->{v * 2 if v else 1.0}"))
            elif isinstance(v, str) and v in CLASSES:
                found.append(("cls", node, f"{v}->{CLASSES[(CLASSES.index(v) + 1) % len(CLASSES)]}"))
        elif isinstance(node, ast.If) and not node.orelse and not (
                len(node.body) == 1 and isinstance(node.body[0], ast.Pass)):
            found.append(("branch", node, "body->pass"))
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in _CALLS:
                found.append(("call", node, f"{name}->{_CALLS[name]}"))
        elif isinstance(node, ast.Return) and isinstance(node.value, (ast.Compare, ast.BoolOp)):
            found.append(("ret", node, "return not (...)"))
    found.sort(key=lambda s: (getattr(s[1], "lineno", 0), getattr(s[1], "col_offset", 0), s[0], s[2]))
    return found


def labels(found: list[tuple[str, ast.AST, str]]) -> list[tuple[int, str]]:
    """(line, "op what") per site; the k-th equal label on one line gets " (k)" (k >= 2)."""
    seen: dict[tuple[int, str], int] = {}
    out = []
    for op, node, what in found:
        key = (getattr(node, "lineno", 0), f"{op} {what}")
        seen[key] = seen.get(key, 0) + 1
        out.append((key[0], key[1] if seen[key] == 1 else f"{key[1]} ({seen[key]})"))
    return out


def apply(tree: ast.Module, index: int) -> tuple[str, Site]:
    """The source of ``tree`` with mutation site ``index`` applied."""
    t = copy.deepcopy(tree)
    op, node, what = sites(t)[index]
    if op == "cmp":
        i = int(what.rpartition("#")[2])
        node.ops[i] = _CMP[type(node.ops[i])]()
    elif op == "bool" and isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif op == "bool":                # `not x` -> `x`
        parent_fix(t, node, node.operand)
    elif op == "num":
        node.value = node.value + 1 if type(node.value) is int else (node.value * 2 if node.value else 1.0)
    elif op == "cls":
        node.value = CLASSES[(CLASSES.index(node.value) + 1) % len(CLASSES)]
    elif op == "branch":
        node.body = [ast.Pass()]
    elif op == "call":
        f = node.func
        if isinstance(f, ast.Name):
            f.id = _CALLS[f.id]
        else:
            f.attr = _CALLS[f.attr]
    elif op == "ret":
        node.value = ast.UnaryOp(op=ast.Not(), operand=node.value)
    ast.fix_missing_locations(t)
    return ast.unparse(t), Site(op, getattr(node, "lineno", 0), what, index)


def parent_fix(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if v is old:
                        value[i] = new
                        return


_IGNORE = (".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache",
           "build", "dist")


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, ignore=lambda d, names: {n for n in names if n in _IGNORE}, symlinks=True)


def _env(work: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{work}{os.pathsep}{work / 'tests' / 'mutation'}",
            "PYTHONDONTWRITEBYTECODE": "1", "FW_MUTANT": "1", **extra}


DESELECT: list[str] = []  # --deselect: tests left out of every run (say which, and why, where you report)


def _argv(tests: list[str], first: bool) -> list[str]:
    return [*(["-x"] if first else []), "-q", "-p", "no:cacheprovider", "-p", "fw_mutation_plugin",
            "-m", "not drill", *(a for d in DESELECT for a in ("--deselect", d)), *tests]


def _pytest(work: Path, tests: list[str], env: dict[str, str], timeout: float, first: bool = True
            ) -> tuple[int | None, str]:
    """Run pytest (``first``: stop at the first failure) in ``work``; (returncode, output), returncode
    None on timeout (the whole process group is killed: `fleetwatch run` children too)."""
    p = subprocess.Popen([sys.executable, "-m", "pytest", *_argv(tests, first)], cwd=work, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return None, ""


class Zygote:
    """A zygote.py process: the same run as ``_pytest`` without paying the libraries' import again."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, str(Path(__file__).with_name("zygote.py"))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.buf = b""

    def _line(self, timeout: float | None) -> dict | None:
        """The next JSON line of the zygote, None if none came within ``timeout``."""
        import json
        import select
        assert self.p.stdout
        fd = self.p.stdout.fileno()
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the zygote died")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def run(self, work: Path, tests: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
        import json
        assert self.p.stdin
        out = work.parent / "pytest.out"
        self.p.stdin.write((json.dumps({"cwd": str(work), "argv": _argv(tests, True), "env": env,
                                        "out": str(out)}) + "\n").encode())
        pid = (self._line(None) or {})["pid"]
        done = self._line(timeout)
        try:
            os.killpg(pid, 9)  # on timeout, or what the run left behind
        except (ProcessLookupError, PermissionError):
            pass
        if done is None:
            self._line(None)  # the child's end, once killed
        text = out.read_text(errors="replace") if out.exists() else ""
        return (None if done is None else done["rc"]), text

    def close(self) -> None:
        if self.p.stdin:
            self.p.stdin.close()
        self.p.wait()


# -- which tests run a line: coverage per test, measured once on the unmutated snapshot --------------

def coverage_map(snap: Path, tests: list[str], files: list[str]) -> tuple[dict, dict, list[str]]:
    """{module file: {line: nodeids of the tests that ran it}}, {nodeid: seconds} and the tests that
    fail under coverage only (a Hypothesis health check too slow when traced): they are run for every
    mutant. The context "" (lines run at import or collection, or by a subprocess that lost its
    test's context) means every test. Exits when a test fails on the unmutated code without coverage
    too: every mutant would look killed."""
    d = Path(tempfile.mkdtemp(prefix="fw-mutcov-"))
    try:
        return _coverage_map(snap, tests, files, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _coverage_map(snap: Path, tests: list[str], files: list[str], d: Path) -> tuple[dict, dict, list[str]]:
    import json

    from coverage import CoverageData
    from coverage.data import combine_parallel_data
    rc = d / "rc"
    rc.write_text("[run]\nparallel = true\nsigterm = true\ncontext = ${FW_MUT_CTX}\n"
                  f"data_file = {d / 'cov'}\ninclude =\n" + "".join(f"    {snap / f}\n" for f in files))
    _, out = _pytest(snap, tests, _env(snap, FW_MUT_COVERAGE=str(rc), FW_MUT_DURATIONS=str(d / "dur.json")),
                     timeout=3600, first=False)
    if not (d / "dur.json").exists():
        sys.exit(f"the coverage run did not finish:\n{out[-3000:]}")
    res = json.loads((d / "dur.json").read_text())
    failed = res["failed"]
    if failed:
        (d / "select").write_text("\n".join(failed) + "\n")
        code, out = _pytest(snap, sorted({f.partition("::")[0] for f in failed}),
                            _env(snap, FW_MUT_SELECT=str(d / "select")), timeout=3600, first=False)
        if code != 0:
            sys.exit(f"the tests fail on the unmutated code (rc {code}); fix that first:\n{out[-3000:]}")
    data = CoverageData(basename=str(d / "cov"))
    combine_parallel_data(data, data_paths=[str(d)])
    cmap = {}
    for f in files:
        by_line: dict[int, set[str]] = {}
        for ln, ctxs in data.contexts_by_lineno(str(snap / f)).items():
            by_line[ln] = {c.rpartition("|")[2] if "|" in c else c for c in ctxs}
        cmap[f] = by_line
    return cmap, res["durations"], failed


def site_lines(tree: ast.Module, node: ast.AST) -> set[int]:
    """The lines whose execution means the mutated code ran: the innermost statement holding the node
    (a compound statement: its header, up to its body), plus the node's own lines."""
    parents = {id(ch): p for p in ast.walk(tree) for ch in ast.iter_child_nodes(p)}
    stmt = node
    while not isinstance(stmt, ast.stmt) and id(stmt) in parents:
        stmt = parents[id(stmt)]
    lines = set()
    if isinstance(stmt, ast.stmt):
        body = getattr(stmt, "body", None)
        end = (body[0].lineno - 1) if isinstance(body, list) and body and isinstance(body[0], ast.stmt) \
            else (stmt.end_lineno or stmt.lineno)
        lines |= set(range(stmt.lineno, max(end, stmt.lineno) + 1))
    if not isinstance(node, ast.stmt):
        lines |= set(range(getattr(node, "lineno", 0), (getattr(node, "end_lineno", None) or 0) + 1))
    return lines


def run_mutant(module: str, index: int, tests: list[str], select: list[str] | None, timeout: float, src: str,
               snap: Path, zyg: Zygote | None = None) -> tuple[Site, str, float]:
    """``src``: the module's text in the snapshot (edits during a run do not shift the sites); ``select``:
    the nodeids to run (None: every test of ``tests``)."""
    rel = Path(*module.split(".")).with_suffix(".py")
    text, site = apply(ast.parse(src), index)
    with tempfile.TemporaryDirectory(prefix="fw-mutant-") as d:
        work = Path(d) / "repo"
        _copy_tree(snap, work)
        (work / rel).write_text(text)
        extra = {}
        if select is not None:
            (Path(d) / "select").write_text("\n".join(select) + "\n")
            extra["FW_MUT_SELECT"] = str(Path(d) / "select")
            tests = sorted({s.partition("::")[0] for s in select}, key=tests.index)
        t0 = time.monotonic()
        code, out = (zyg.run if zyg else _pytest)(work, tests, _env(work, **extra), timeout)
    by = [ln.split(" - ")[0].split(" ", 1)[1] for ln in out.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    outcome = ("killed (timeout)" if code is None else "survived" if code == 0 else
               f"killed by {by[0] if by else '?'}" if code == 1
               else f"error {code}: {out.strip().splitlines()[-1:] if out.strip() else ''}")
    return site, outcome, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", help="a module of MODULES (default: all)")
    ap.add_argument("--max", type=int, default=0, help="mutants per module (0: all)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=300.0, help="cap of one mutant's test run (s)")
    ap.add_argument("--all-tests", action="store_true",
                    help="run every test of the module per mutant (no coverage selection; slow)")
    ap.add_argument("--min", type=float, default=90.0, help="gate: minimum %% killed per module")
    ap.add_argument("--line", type=int, action="append", help="only the mutants on this line (re-check one)")
    ap.add_argument("--rev", help="mutate this commit (git archive) instead of the working tree, e.g. HEAD "
                                  "while others have uncommitted work")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every mutant's outcome (killed by which test)")
    ap.add_argument("--no-zygote", action="store_true", help="a fresh `python -m pytest` per mutant")
    ap.add_argument("--deselect", action="append", default=[],
                    help="a test nodeid to leave out (one that fails on the unmutated code, reported as such)")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    a = ap.parse_args(argv)
    DESELECT[:] = a.deselect
    if a.deselect:
        print(f"left out of every run: {' '.join(a.deselect)}", flush=True)
    mods = a.module or list(MODULES)
    t_start = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up the snapshot when killed
    snap = Path(tempfile.mkdtemp(prefix="fw-mutsnap-")) / "repo"
    if a.rev:  # one snapshot: coverage, sites and every mutant see the same code
        snap.mkdir()
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(snap)], input=arch, check=True)
    else:
        _copy_tree(ROOT, snap)
    shutil.copy2(Path(__file__).with_name("fw_mutation_plugin.py"), snap / "tests" / "mutation")
    try:
        return _main(a, mods, snap, t_start)
    finally:
        shutil.rmtree(snap.parent, ignore_errors=True)


def _main(a: argparse.Namespace, mods: list[str], snap: Path, t_start: float) -> int:
    zygotes: queue.Queue[Zygote | None] = queue.Queue()
    for _ in range(max(1, a.jobs)):
        zygotes.put(None if a.no_zygote or a.list else Zygote())
    try:
        rc = _modules(a, mods, snap, t_start, zygotes)
    finally:
        while not zygotes.empty():
            z = zygotes.get()
            if z:
                z.close()
    if not a.list:  # CPU time of every test run: the wall time on an idle machine is about this / jobs
        t = os.times()
        print(f"cpu: {t.children_user + t.children_system:.0f} s in test runs, {time.monotonic() - t_start:.0f} s "
              f"wall", flush=True)
    return rc


def _modules(a: argparse.Namespace, mods: list[str], snap: Path, t_start: float, zygotes: queue.Queue) -> int:
    worst = 100.0
    files = {m: str(Path(*m.split(".")).with_suffix(".py")) for m in mods}
    all_tests = list(dict.fromkeys(t for m in mods for t in MODULES[m] if (snap / t).exists()))
    cmap: dict = {}
    durations: dict = {}
    always: list[str] = []
    if not a.list and not a.all_tests:
        print(f"coverage per test: {' '.join(all_tests)}", flush=True)
        cmap, durations, always = coverage_map(snap, all_tests, list(files.values()))
        print(f"  {len(durations)} tests, {time.monotonic() - t_start:.0f} s", flush=True)
        if always:
            print(f"  failed under coverage only (passed without it), run for every mutant: {always}", flush=True)
    for m in mods:
        rel = files[m]
        tests = [t for t in MODULES[m] if (snap / t).exists()]
        text = (snap / rel).read_text()
        tree = ast.parse(text)
        eq = EQUIVALENT.get(m, {})
        src = code_lines(text)
        found = sites(tree)
        names = [(src[ln - 1].strip() if 0 < ln <= len(src) else "", lab) for ln, lab in labels(found)]
        n = len(names)
        unknown = set(eq) - set(names)
        if unknown:  # the module changed under the list: say so rather than skip the wrong mutants
            print(f"{m}: EQUIVALENT entries match no mutant (update the list): {sorted(unknown)}")
        skipped = [i for i in range(n) if names[i] in eq]
        idx = [i for i in range(n) if names[i] not in eq and (not a.line or labels(found)[i][0] in a.line)]
        if a.max and len(idx) > a.max:  # spread evenly over the file
            idx = [idx[j] for j in sorted({round(k * (len(idx) - 1) / (a.max - 1)) for k in range(a.max)})] \
                if a.max > 1 else idx[:1]
        if a.list:
            for i in idx:
                print(m, f"{found[i][1].lineno}: {labels(found)[i][1]}")  # type: ignore[attr-defined]
            continue
        t_mod = time.monotonic()
        own = tuple(f"{t}::" for t in tests)
        plan: dict[int, list[str] | None] = {}
        uncovered = []
        for i in idx:
            if a.all_tests:
                plan[i] = None
                continue
            ctxs = set().union(*(cmap[rel].get(ln, set()) for ln in site_lines(tree, found[i][1])))
            if "" in ctxs:
                plan[i] = None                     # run at import: every test
            else:
                sel = sorted((c for c in ctxs | set(always) if c.startswith(own)),
                             key=lambda c: (tests.index(c.partition("::")[0])))
                if sel:
                    plan[i] = sel
                else:
                    uncovered.append(i)
        print(f"{m}: {len(idx)} of {n} mutants ({len(skipped)} equivalent skipped, {len(uncovered)} on lines no "
              f"test runs), tests: {' '.join(tests)}", flush=True)
        survivors = []
        for i in uncovered:
            _, site = apply(ast.parse(text), i)
            print(f"    survived (no test runs the line): {rel}:{site.line} {names[i][1]}"
                  f"  | {names[i][0][:90]}", flush=True)
            survivors.append(i)
        killed, errors = 0, 0

        def one(i: int, m: str = m, tests: list[str] = tests, text: str = text, plan: dict = plan,
                own: tuple = own, zygotes: queue.Queue = zygotes) -> tuple[Site, str, float]:
            sel = plan[i]
            base = sum(durations.get(t, 1.0) for t in sel) if sel is not None else \
                sum(v for k, v in durations.items() if k.startswith(own)) or a.timeout
            zyg = zygotes.get()
            try:
                return run_mutant(m, i, tests, sel, min(a.timeout, max(90.0, 8 * base)), text, snap, zyg)
            finally:
                zygotes.put(zyg)

        with cf.ThreadPoolExecutor(max(1, a.jobs)) as ex:
            for i, (site, outcome, dur) in zip(plan, ex.map(one, plan)):
                if outcome.startswith("killed"):
                    killed += 1
                    if a.verbose:
                        n_sel = "all" if plan[i] is None else len(plan[i] or ())
                        print(f"    {outcome} ({n_sel} tests, {dur:.1f} s): {rel}:{site.line} {names[i][1]}",
                              flush=True)
                else:
                    errors += outcome.startswith("error")
                    survivors.append(i)
                    print(f"    {outcome}: {rel}:{site.line} {names[i][1]}  | {names[i][0][:90]}",
                          flush=True)
        total = len(idx)
        score = 100.0 * killed / total if total else 100.0
        worst = min(worst, score)
        print(f"  {m}: {killed}/{total} killed = {score:.0f} % ({len(uncovered)} never run, {errors} errors, "
              f"{len(skipped)} equivalent not run; {time.monotonic() - t_mod:.0f} s)", flush=True)
    if a.list:
        return 0
    print(f"gate: worst module {worst:.0f} % (minimum {a.min:.0f} %); {time.monotonic() - t_start:.0f} s")
    return 0 if worst >= a.min else 1


if __name__ == "__main__":
    sys.exit(main())
