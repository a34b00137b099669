"""The recorded tasks of the seam evaluation (bench/seam_eval.py): files, steps, a follow-up question.

Each task is a small project and a scripted agent that works through real tools, narrating
intent but never the values it reads; after a micro-handoff, a question asks for one value
that lay only in a tool result the seam stripped. `pattern` finds the answer in that
output (group 1) and `query` is what a model would search `recall` for; both are used only
to record the answer and by the loopback responder, never shown to a real model.
"""

from __future__ import annotations

from typing import Any

NARRATE = "I will {what}, because {why}; I expect {expect}."


def step(what: str, why: str, expect: str, tool: str, **args: Any) -> dict[str, Any]:
    """One narrated tool call of a task."""
    return {"narration": NARRATE.format(what=what, why=why, expect=expect), "tool": tool, "input": args}


TASKS: list[dict[str, Any]] = [
    {
        "name": "billing-port",
        "files": {"config/services.toml": "[auth]\nport = 7001\nworkers = 4\n\n[billing]\nhost = \"0.0.0.0\"\nport = 8443\nworkers = 2\n\n[search]\nport = 9200\n"},
        "steps": [
            step("list the config folder", "the services are configured there", "one TOML file", "find_files", pattern="config/*"),
            step("read the services config", "the port clash report names billing", "a section per service", "read_file", path="config/services.toml"),
        ],
        "question": "Which port does the billing service listen on, according to config/services.toml?",
        "pattern": r"\[billing\][^\[]*?port = (\d+)", "query": "billing port",
    },
    {
        "name": "pinned-version",
        "files": {"requirements.txt": "flask==3.0.3\nrequests==2.31.4\nurllib3==2.2.1\npydantic==2.7.0\n"},
        "steps": [
            step("read the pinned requirements", "the TLS bug depends on the HTTP stack versions", "exact pins", "read_file", path="requirements.txt"),
            step("count the pinned packages", "the lock audit wants a total", "a small number", "bash", command="grep -c '==' requirements.txt"),
        ],
        "question": "Which exact version of requests is pinned in requirements.txt?",
        "pattern": r"requests==([\d.]+)", "query": "requests",
    },
    {
        "name": "timeout-constant",
        "files": {"app/settings.py": "DEBUG = False\nRETRIES = 3\nTIMEOUT_SECONDS = 37\nCACHE_DIR = '/var/cache/app'\n"},
        "steps": [
            step("find the settings module", "the timeout must be set somewhere central", "app/settings.py", "find_files", pattern="app/*.py"),
            step("read the settings", "the slow-request report blames the timeout", "a handful of constants", "read_file", path="app/settings.py"),
        ],
        "question": "What is the value of TIMEOUT_SECONDS in app/settings.py?",
        "pattern": r"TIMEOUT_SECONDS = (\d+)", "query": "TIMEOUT_SECONDS",
    },
    {
        "name": "definition-line",
        "files": {"src/parser.py": "".join(f"# filler line {n}\n" for n in range(1, 42)) + "def parse_header(raw: bytes) -> dict:\n    return {}\n"},
        "steps": [
            step("locate parse_header", "the traceback points into it", "one definition", "search_text", pattern="def parse_header", path="src"),
            step("count the parser's lines", "I want to know how big the module is", "a few dozen lines", "bash", command="wc -l src/parser.py"),
        ],
        "question": "On which line of src/parser.py is parse_header defined?",
        "pattern": r"parser\.py:(\d+):\s*def parse_header", "query": "parse_header",
    },
    {
        "name": "fixture-checksum",
        "files": {"data/fixture.csv": "".join(f"{n},item-{n},{n * 7 % 13}\n" for n in range(57))},
        "steps": [
            step("hash the fixture", "the test must prove the fixture did not change", "a SHA-256", "bash", command="sha256sum data/fixture.csv"),
        ],
        "question": "What is the SHA-256 of data/fixture.csv, as sha256sum printed it?",
        "pattern": r"([0-9a-f]{64})\s+data/fixture\.csv", "query": "sha256sum fixture",
    },
    {
        "name": "row-count",
        "files": {"data/orders.csv": "id,total\n" + "".join(f"{n},{n * 3}.50\n" for n in range(1, 124))},
        "steps": [
            step("count the data rows", "the import claims to drop some", "a three-digit count", "bash",
                 command="python3 -c \"import csv; print('rows:', sum(1 for _ in csv.DictReader(open('data/orders.csv'))))\""),
            step("look at the header", "I need the column names", "id and total", "bash", command="head -n 1 data/orders.csv"),
        ],
        "question": "How many data rows does data/orders.csv have, as counted by the csv module?",
        "pattern": r"rows: (\d+)", "query": "rows",
    },
    {
        "name": "code-owner",
        "files": {"CODEOWNERS": "/docs/ @sam-writes\n/src/billing/ @ana-lopez\n/src/search/ @kofi-m\n"},
        "steps": [
            step("read CODEOWNERS", "the billing change needs the right reviewer", "one owner per folder", "read_file", path="CODEOWNERS"),
        ],
        "question": "Who owns /src/billing/ according to CODEOWNERS?",
        "pattern": r"/src/billing/ (@[\w-]+)", "query": "billing",
    },
    {
        "name": "database-host",
        "files": {"config/backing.conf": "DATABASE_URL=postgres://app@db-7.internal:5433/shop\nREDIS_URL=redis://cache-2.internal:6379/0\n"},
        "steps": [
            step("read the backing-services config", "the connection error names the database", "URLs for each backing service", "read_file", path="config/backing.conf"),
        ],
        "question": "Which host does DATABASE_URL point at in config/backing.conf (host name only)?",
        "pattern": r"DATABASE_URL=postgres://\w+@([\w.-]+):", "query": "DATABASE_URL",
    },
    {
        "name": "max-retries",
        "files": {"deploy.yaml": "service: billing\nreplicas: 3\nstrategy:\n  max_retries: 11\n  backoff: exponential\n"},
        "steps": [
            step("search for the retry setting", "the deploy keeps retrying too long", "one line in the deploy file", "search_text", pattern="max_retries"),
            step("read the deploy file", "I want the whole strategy block", "a short YAML file", "read_file", path="deploy.yaml"),
        ],
        "question": "What is max_retries set to in deploy.yaml?",
        "pattern": r"max_retries: (\d+)", "query": "max_retries",
    },
    {
        "name": "commit-subject",
        "files": {"CHANGELOG.md": "# Changelog\n\n## 1.4.0\n- Retry budget per tenant\n"},
        "commits": ["Add retry budget per tenant", "Update the changelog for 1.4.0"],
        "steps": [
            step("look at the recent commits", "the changelog must match what was committed", "a few subject lines", "git", action="log"),
        ],
        "question": "What is the abbreviated hash of the commit 'Add retry budget per tenant'?",
        "pattern": r"([0-9a-f]{7,12})\s+Add retry budget per tenant", "query": "retry budget",
    },
    {
        "name": "function-count",
        "files": {"src/inventory.py": "".join(f"def op_{n}(x):\n    return x + {n}\n\n" for n in range(19))},
        "steps": [
            step("count the functions of the inventory module", "the refactor plan sizes the work by it", "a count in the teens", "bash",
                 command="echo functions: $(grep -c '^def ' src/inventory.py)"),
        ],
        "question": "How many top-level functions does src/inventory.py define?",
        "pattern": r"functions: (\d+)", "query": "functions",
    },
    {
        "name": "python-version",
        "files": {"pyproject.toml": "[project]\nname = \"shop\"\nrequires-python = \">=3.11.4\"\n"},
        "steps": [
            step("read the project metadata", "the CI image must satisfy the Python floor", "a requires-python line", "read_file", path="pyproject.toml"),
        ],
        "question": "What minimum Python version does pyproject.toml require (version number only)?",
        "pattern": r"requires-python = \">=([\d.]+)\"", "query": "requires-python",
    },
]
