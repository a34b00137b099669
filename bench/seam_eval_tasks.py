"""The recorded tasks of the seam evaluation (bench/seam_eval.py): projects, long sessions, questions.

Each task is a small but realistic project and a scripted agent that works through it with
real tools for 30 or more calls (reading modules, paging through logs, counting, hashing,
searching), narrating its intent but never the values it reads. After a micro-handoff,
questions ask for exact values that lay only in tool results the seam stripped, and one
control question asks for a value that never existed in the session (its right answer is
UNKNOWN). `pattern` finds an answer in tool output (group 1) and `query` is what a model
would search `recall` for; both are used only to record the answers and by the loopback
responder, never shown to a real model.
"""

from __future__ import annotations

from itertools import product
from typing import Any

NARRATE = "I will {what}, because {why}; I expect {expect}."
VERBS = ("load", "check", "price", "reserve", "apply", "refund", "split", "merge",
         "audit", "retry", "notify", "round", "quote", "settle", "queue", "flag")


def step(what: str, why: str, expect: str, tool: str, **args: Any) -> dict[str, Any]:
    """One narrated tool call of a task."""
    return {"narration": NARRATE.format(what=what, why=why, expect=expect), "tool": tool, "input": args}


def read(path: str, why: str, expect: str = "a few hundred lines of code", **lines: int) -> dict[str, Any]:
    """A narrated read_file call (optionally a line range)."""
    where = f"lines {lines['start_line']}-{lines['end_line']} of {path}" if lines else path
    return step(f"read {where}", why, expect, "read_file", path=path, **lines)


def bash(what: str, why: str, expect: str, command: str) -> dict[str, Any]:
    """A narrated bash call."""
    return step(what, why, expect, "bash", command=command)


def ask(qid: str, question: str, pattern: str, query: str) -> dict[str, Any]:
    """A follow-up question whose answer group 1 of `pattern` finds in stripped tool output."""
    return {"id": qid, "question": question, "pattern": pattern, "query": query}


def control(qid: str, question: str, pattern: str, query: str) -> dict[str, Any]:
    """A question about a value that never existed in the session: the right answer is UNKNOWN."""
    return {**ask(qid, question, pattern, query), "control": True}


# -- generated project content ------------------------------------------------------------

def module(topic: str, nouns: tuple[str, ...], functions: int) -> str:
    """A Python module of `functions` small, plausible order-handling functions."""
    out = [f'"""The {topic} step of the shop: one function per rule, each pure."""', "",
           "from __future__ import annotations", "", "from decimal import Decimal", ""]
    for n, (noun, verb) in enumerate(list(product(nouns, VERBS))[:functions]):
        out += [
            "",
            f"def {verb}_{noun}(order: dict, *, attempts: int = {2 + n % 4}) -> dict:",
            f'    """{verb.capitalize()} the {noun} of one order ({topic}); returns a new order dict."""',
            '    lines = order.get("lines", [])',
            '    total = sum(Decimal(str(line["price"])) * line["qty"] for line in lines)',
            "    if not lines or total <= 0:",
            f'        raise ValueError(f"{verb}_{noun}: order {{order.get(\'id\')!r}} has nothing to {verb}")',
            "    for _ in range(attempts):",
            '        if order.get("state") != "locked":',
            "            break",
            f'    return {{**order, "{noun}_{verb}_done": True, "total": str(round(total * Decimal("1.{n % 7}"), 2))}}',
        ]
    return "\n".join(out) + "\n"


def test_module(subject: str, names: tuple[str, ...]) -> str:
    """A test module with one test per name."""
    out = [f'"""Tests of the {subject} step."""', "", "import pytest", "",
           f"from shop import {subject}", "", "ORDER = {\"id\": \"o-1\", \"lines\": [{\"price\": 4.5, \"qty\": 2}]}", ""]
    for name in names:
        out += ["", f"def test_{name}_marks_the_order() -> None:",
                f"    assert {subject}.{name}(ORDER)[\"total\"]", "",
                f"def test_{name}_refuses_an_empty_order() -> None:",
                "    with pytest.raises(ValueError):",
                f"        {subject}.{name}({{\"id\": \"o-2\", \"lines\": []}})"]
    return "\n".join(out) + "\n"


def log(service: str, lines: int) -> str:
    """A request log with a few slow requests and errors."""
    paths = ("/api/cart", "/api/checkout", "/api/pay", "/api/ship", "/api/tax", "/health")
    out = []
    for n in range(lines):
        level, status = ("ERROR", 502) if n % 37 == 11 else ("WARN", 429) if n % 23 == 5 else ("INFO", 200)
        out.append(f"2026-11-28T10:{n // 60 % 60:02d}:{n % 60:02d}Z {level:5} {service} req=r{n * 7919 % 100000:05d} "
                   f"path={paths[n * 5 % 6]} status={status} ms={(n * 37 % 900) + 12}")
    return "\n".join(out) + "\n"


def csv_rows(header: str, rows: int, row: Any) -> str:
    """A CSV file: the header, then `row(n)` for n in 1..rows."""
    return header + "\n" + "".join(row(n) + "\n" for n in range(1, rows + 1))


def services() -> str:
    """A services config with one section per service (billing's port is asked about)."""
    ports = {"auth": 7001, "billing": 8443, "search": 9200, "cart": 7310, "inventory": 7420, "shipping": 7530,
             "tax": 7640, "notify": 7750, "gateway": 8080, "reports": 7860, "fraud": 7970, "catalog": 8180}
    return "".join(f"[{name}]\nhost = \"{name}.svc.internal\"\nport = {port}\nworkers = {2 + port % 5}\n"
                   f"timeout_ms = {port % 900 + 100}\n\n" for name, port in ports.items())


PINS = ("flask==3.0.3", "requests==2.31.4", "urllib3==2.2.1", "pydantic==2.7.0", "sqlalchemy==2.0.30",
        "alembic==1.13.1", "celery==5.4.0", "redis==5.0.4", "gunicorn==22.0.0", "jinja2==3.1.4",
        "itsdangerous==2.2.0", "click==8.1.7", "certifi==2024.2.2", "idna==3.7", "charset-normalizer==3.3.2",
        "kombu==5.3.7", "vine==5.1.0", "billiard==4.2.0", "markupsafe==2.1.5", "werkzeug==3.0.3",
        "python-dateutil==2.9.0", "six==1.16.0", "pytz==2024.1", "structlog==24.1.0", "orjson==3.10.3")

DEPLOY = """services:
  - name: gateway
    replicas: 4
    strategy:
      backoff: linear
  - name: cart
    replicas: 3
    strategy:
      backoff: constant
  - name: billing
    replicas: 3
    strategy:
      max_retries: 11
      backoff: exponential
  - name: notify
    replicas: 2
    strategy:
      backoff: linear
"""

BACKING = ("DATABASE_URL=postgres://app@db-7.internal:5433/shop\nREDIS_URL=redis://cache-2.internal:6379/0\n"
           "QUEUE_URL=amqp://queue-1.internal:5672/shop\nSEARCH_URL=http://search.svc.internal:9200\n")

SHOP = ("checkout", "cart", "payments", "tax", "shipping", "notify", "api", "models")
SHOP_NOUNS = {"checkout": ("basket", "receipt"), "cart": ("line", "coupon"), "payments": ("charge", "card"),
              "tax": ("vat", "levy"), "shipping": ("parcel", "label"), "notify": ("email", "sms"),
              "api": ("request", "session"), "models": ("record", "snapshot")}


def checkout_incident() -> dict[str, Any]:
    """A slow-checkout incident across a shop service: code, tests, logs, config, deploy."""
    files = {f"src/shop/{m}.py": module(m, SHOP_NOUNS[m], 20) for m in SHOP}
    files |= {f"tests/test_{m}.py": test_module(m, tuple(f"{v}_{SHOP_NOUNS[m][0]}" for v in VERBS[:8]))
              for m in ("checkout", "cart", "payments")}
    files |= {"logs/checkout.log": log("checkout", 600), "config/services.toml": services(),
              "requirements.txt": "\n".join(PINS) + "\n", "deploy.yaml": DEPLOY, "config/backing.conf": BACKING}
    steps = [step("list the shop's modules", "the incident report names checkout but the slowness may sit in a "
                  "neighbour", "about eight modules", "find_files", pattern="src/**/*.py")]
    steps += [read(f"src/shop/{m}.py", f"the {m} step is on the checkout path") for m in SHOP]
    steps += [step("search the code for retry loops", "a retry storm would explain slow checkouts",
                   "one loop per rule function", "search_text", pattern="range\\(attempts\\)", path="src"),
              step("list the tests", "I want to know what the checkout path is covered by", "three test modules",
                   "find_files", pattern="tests/*.py")]
    steps += [read(f"tests/test_{m}.py", f"the {m} tests show which rules are pinned", "pairs of tests") for m in ("checkout", "cart", "payments")]
    steps += [read("logs/checkout.log", "the incident window is in this log", "about a hundred request lines",
                   start_line=s, end_line=s + 99) for s in range(1, 600, 100)]
    steps += [
        bash("count the errors in the log", "the report says errors spiked", "a few dozen", "grep -c ' ERROR ' logs/checkout.log"),
        bash("list the error lines", "I want their paths and timings", "502s on a few paths", "grep ' ERROR ' logs/checkout.log | head -n 40"),
        bash("find the slowest requests", "slowness is the complaint", "latencies near a second", "sort -t= -k6 -n logs/checkout.log | tail -n 25"),
        bash("count requests per path", "the load may be uneven", "six paths", "grep -o 'path=[^ ]*' logs/checkout.log | sort | uniq -c | sort -rn"),
        read("config/services.toml", "a port clash between services was reported", "one section per service"),
        read("requirements.txt", "the TLS warnings depend on the HTTP stack versions", "exact pins"),
        read("deploy.yaml", "the deploy strategy decides how often billing is retried", "a short YAML file"),
        read("config/backing.conf", "the connection errors name the backing services", "one URL per service"),
        step("look at the recent commits", "the slowness started after a deploy", "a few subject lines", "git", action="log"),
        step("check the working tree", "I must not build on uncommitted changes", "a clean tree", "git", action="status"),
        bash("count lines per module", "I want to size the review", "a few hundred each", "wc -l src/shop/*.py tests/*.py"),
        bash("compile every module", "a syntax error would break the import at start", "no output but the marker",
             "python3 -m py_compile src/shop/*.py && echo compiled"),
        step("list the payment rules", "the pay path shows the most 502s", "twenty definitions", "search_text", pattern="^def ", path="src/shop/payments.py"),
        step("search for totals being rounded", "a rounding loop could be slow", "one line per rule", "search_text", pattern="round\\(", path="src/shop"),
        read("src/shop/checkout.py", "I want the first rules again before deciding", "the module header", start_line=1, end_line=60),
    ]
    questions = [
        ask("billing-port", "Which port does the billing service listen on, according to config/services.toml?",
            r"\[billing\][^\[]*?port = (\d+)", "billing port"),
        ask("pinned-requests", "Which exact version of requests is pinned in requirements.txt?", r"requests==([\d.]+)", "requests"),
        ask("max-retries", "What is max_retries set to in deploy.yaml?", r"max_retries: (\d+)", "max_retries"),
        ask("database-host", "Which host does DATABASE_URL point at in config/backing.conf (host name only)?",
            r"DATABASE_URL=postgres://\w+@([\w.-]+):", "DATABASE_URL"),
        control("metrics-port", "Which port does the metrics-exporter service listen on, according to config/services.toml?",
                r"\[metrics-exporter\][^\[]*?port = (\d+)", "metrics-exporter port"),
    ]
    return {"name": "checkout-incident", "files": files, "steps": steps, "questions": questions}



IMPORTER = ("reader", "validate", "transform", "dedupe", "currency", "load", "report", "cli")
IMPORTER_NOUNS = {"reader": ("row", "batch"), "validate": ("field", "schema"), "transform": ("amount", "date"),
                  "dedupe": ("key", "pair"), "currency": ("rate", "sum"), "load": ("table", "chunk"),
                  "report": ("summary", "chart"), "cli": ("flag", "option")}
OWNERS = ("/docs/ @sam-writes", "/src/billing/ @ana-lopez", "/src/search/ @kofi-m", "/src/importer/ @li-wen",
          "/migrations/ @dba-team", "/data/ @li-wen", "/ci/ @ops-rota", "/src/auth/ @nadia-k", "/src/cart/ @tom-h",
          "/src/tax/ @ana-lopez-backup", "/src/notify/ @kofi-m", "/infra/ @ops-rota", "/tests/ @qa-guild")
PYPROJECT = """[project]
name = "shop-importer"
version = "2.3.0"
description = "Imports orders, customers and products into the shop database"
requires-python = ">=3.11.4"
dependencies = ["sqlalchemy>=2.0", "click>=8.1", "structlog>=24.1"]

[project.scripts]
shop-import = "importer.cli:main"

[tool.pytest.ini_options]
addopts = "-q --strict-markers"
testpaths = ["tests"]

[tool.ruff]
line-length = 110
"""


def migration(table: str, columns: tuple[str, ...]) -> str:
    """A SQL migration creating one table with an index per column."""
    cols = ",\n".join(f"    {c} TEXT NOT NULL" for c in columns)
    indexes = "".join(f"CREATE INDEX {table}_{c}_idx ON {table} ({c});\n" for c in columns)
    return f"-- create {table}\nCREATE TABLE {table} (\n    id INTEGER PRIMARY KEY,\n{cols}\n);\n{indexes}"


def orders_import() -> dict[str, Any]:
    """A data import that drops rows: the pipeline's code, its data files, docs and migrations."""
    files = {f"src/importer/{m}.py": module(m, IMPORTER_NOUNS[m], 20) for m in IMPORTER}
    files |= {
        "data/orders.csv": csv_rows("id,total,customer,created", 123, lambda n: f"{n},{n * 3}.50,c{n * 17 % 200:03d},2026-11-{n % 28 + 1:02d}"),
        "data/fixture.csv": csv_rows("id,item,qty", 57, lambda n: f"{n},item-{n},{n * 7 % 13}"),
        "data/customers.csv": csv_rows("id,name,country", 200, lambda n: f"c{n:03d},customer {n},{('NL', 'DE', 'FR', 'ES')[n % 4]}"),
        "data/products.csv": csv_rows("sku,title,price", 150, lambda n: f"sku-{n:04d},product {n},{n % 40 + 0.99:.2f}"),
        "CODEOWNERS": "\n".join(OWNERS) + "\n", "pyproject.toml": PYPROJECT,
        "docs/importer.md": "# The importer\n\n" + "".join(
            f"## Step {m}\n\nThe {m} step reads what the previous step produced and hands on a list of "
            f"dicts. Its rules are the functions of src/importer/{m}.py; each is pure and raises ValueError "
            f"on an empty order. Run it alone with `shop-import --only {m}`.\n\n" for m in IMPORTER),
    }
    files |= {f"migrations/00{n}_{t}.sql": migration(t, cols) for n, (t, cols) in enumerate(
        [("orders", ("total", "customer", "created")), ("customers", ("name", "country")),
         ("products", ("title", "price")), ("imports", ("source", "started", "finished", "rows"))], 1)}
    steps = [step("list the importer's modules", "rows go missing somewhere in the pipeline", "eight modules",
                  "find_files", pattern="src/importer/*.py"),
             read("docs/importer.md", "the docs say what each step should do", "a section per step")]
    steps += [read(f"src/importer/{m}.py", f"the {m} step may be the one dropping rows") for m in IMPORTER]
    steps += [step("list the migrations", "the table definitions constrain what loads", "four files", "find_files", pattern="migrations/*.sql")]
    steps += [read(f"migrations/00{n}_{t}.sql", f"the {t} table's constraints could reject rows", "a CREATE TABLE and indexes")
              for n, t in enumerate(("orders", "customers", "products", "imports"), 1)]
    steps += [
        bash("look at the head of every data file", "the headers must match what the reader expects", "four headers",
             "head -n 3 data/*.csv"),
        bash("count the order rows with the csv module", "the import claims to drop some", "a three-digit count",
             "python3 -c \"import csv; print('rows:', sum(1 for _ in csv.DictReader(open('data/orders.csv'))))\""),
        read("data/orders.csv", "I want to see the rows themselves", "one order per line"),
        read("data/customers.csv", "orders reference customers by id", "two hundred customers", start_line=1, end_line=120),
        read("data/customers.csv", "the rest of the customers", "the tail of the file", start_line=121, end_line=201),
        read("data/products.csv", "prices feed the currency step", "one product per line"),
        bash("hash the fixture", "the test must prove the fixture did not change", "a SHA-256", "sha256sum data/fixture.csv"),
        bash("count the fields per line of each data file", "a ragged line would be dropped", "constant counts",
             "for f in data/*.csv; do awk -F, '{print FILENAME, NF}' $f | sort | uniq -c; done"),
        read("CODEOWNERS", "the fix needs the right reviewers", "one owner per folder"),
        read("pyproject.toml", "the CI image must satisfy the Python floor", "the project metadata"),
        step("search for where rows are skipped", "a silent `continue` could drop rows", "a few matches",
             "search_text", pattern="raise ValueError", path="src/importer"),
        step("look at the recent commits", "the drop may have started with a change", "a few subject lines", "git", action="log"),
        step("check the working tree", "I must not build on uncommitted changes", "a clean tree", "git", action="status"),
        bash("count lines per module", "I want to size the review", "a few hundred each", "wc -l src/importer/*.py docs/importer.md"),
        bash("compile every module", "a syntax error would stop the pipeline", "the marker alone",
             "python3 -m py_compile src/importer/*.py && echo compiled"),
        step("list the dedupe rules", "dedupe is the likeliest step to drop rows", "twenty definitions", "search_text",
             pattern="^def ", path="src/importer/dedupe.py"),
        read("src/importer/dedupe.py", "I want the dedupe rules again before deciding", "the first rules", start_line=1, end_line=80),
    ]
    questions = [
        ask("row-count", "How many data rows does data/orders.csv have, as counted by the csv module?", r"rows: (\d+)", "rows"),
        ask("fixture-checksum", "What is the SHA-256 of data/fixture.csv, as sha256sum printed it?",
            r"([0-9a-f]{64})\s+data/fixture\.csv", "sha256sum fixture"),
        ask("code-owner", "Who owns /src/billing/ according to CODEOWNERS?", r"/src/billing/ (@[\w-]+)", "billing"),
        ask("python-floor", "What minimum Python version does pyproject.toml require (version number only)?",
            r"requires-python = \">=([\d.]+)\"", "requires-python"),
        control("refunds-checksum", "What is the SHA-256 of data/refunds.csv, as sha256sum printed it?",
                r"([0-9a-f]{64})\s+data/refunds\.csv", "sha256sum refunds"),
    ]
    return {"name": "orders-import", "files": files, "steps": steps, "questions": questions}


LEXER = ("lexer", "tokens", "nodes", "printer", "errors", "walker")
LEXER_NOUNS = {"lexer": ("token", "span"), "tokens": ("kind", "text"), "nodes": ("node", "child"),
               "printer": ("line", "indent"), "errors": ("error", "hint"), "walker": ("visit", "path")}
SETTINGS = ("DEBUG = False\nRETRIES = 3\nTIMEOUT_SECONDS = 37\nCACHE_DIR = '/var/cache/app'\n"
            "LOG_LEVEL = 'info'\nMAX_HEADER_BYTES = 16384\nWORKERS = 6\nFEATURE_FLAGS = ('fast-path', 'strict-headers')\n")


def parser_module() -> str:
    """src/parser.py: helpers first, parse_header defined on line 42, more functions after."""
    head = ['"""Parsing of request heads: the header block, then the body framing."""', "",
            "from __future__ import annotations", "", "import re", "from decimal import Decimal", "",
            "HEADER = re.compile(rb'^([!-9;-~]+):[ \\t]*(.*?)[ \\t]*$')", "MAX_LINE = 8190", ""]
    for n in range(7):
        head += ["", f"def _helper_{n}(raw: bytes) -> bytes:", f'    """Strip framing variant {n}."""',
                 f"    return raw.strip(b'\\r\\n')[{n}:]"]
    head += ["", "# One header per line; the block ends at the first empty line.", ""]
    body = ["def parse_header(raw: bytes) -> dict:", '    """The header fields of one request head."""',
            "    fields = {}", "    for line in raw.split(b'\\r\\n'):", "        found = HEADER.match(line)",
            "        if found:", "            fields[found.group(1).decode().lower()] = found.group(2).decode()",
            "    return fields"]
    return "\n".join(head + body) + "\n" + module("parser", ("body", "chunk"), 20).split("from decimal import Decimal\n", 1)[1]


def parser_refactor() -> dict[str, Any]:
    """A refactor of a request parser: the parser, its neighbours, settings, history."""
    files = {f"src/{m}.py": module(m, LEXER_NOUNS[m], 22) for m in LEXER}
    files |= {"src/parser.py": parser_module(), "app/settings.py": SETTINGS,
              "src/inventory.py": "".join(f"def op_{n}(x):\n    return x + {n}\n\n" for n in range(19)),
              "CHANGELOG.md": "# Changelog\n\n## 1.4.0\n- Retry budget per tenant\n- Stricter header parsing\n"}
    commits = [("Add retry budget per tenant", "app/settings.py", "RETRY_BUDGET_PER_TENANT = 5\n"),
               ("Split the lexer from the parser", "src/lexer.py", "\n# Split from src/parser.py.\n"),
               ("Update the changelog for 1.4.0", "CHANGELOG.md", "- Lexer split from the parser\n")]
    steps = [step("locate parse_header", "the traceback points into it", "one definition", "search_text",
                  pattern="def parse_header", path="src"),
             read("src/parser.py", "I need the whole parser before refactoring it", "helpers, then parse_header")]
    steps += [read(f"src/{m}.py", f"the {m} module is a neighbour the refactor will touch") for m in LEXER]
    steps += [
        read("app/settings.py", "the slow-request report blames a timeout", "a handful of constants"),
        step("look at the recent commits", "the changelog must match what was committed", "a few subject lines", "git", action="log"),
        read("CHANGELOG.md", "the release notes name the same changes", "one release"),
        bash("count the functions of the inventory module", "the refactor plan sizes the work by it", "a count in the teens",
             "echo functions: $(grep -c '^def ' src/inventory.py)"),
        bash("count the parser's lines", "I want to know how big the module is", "a few hundred lines", "wc -l src/parser.py"),
        step("find every caller of the lexer", "the split must keep them working", "a few imports", "search_text",
             pattern="lexer", path="src"),
        step("search for the regular expressions", "a slow pattern would explain the timeouts", "a few compiled patterns",
             "search_text", pattern="re\\.compile", path="src"),
        step("list every function in the neighbours", "I want the refactor's blast radius", "about a hundred definitions",
             "search_text", pattern="^def ", path="src"),
        step("check the working tree", "I must not build on uncommitted changes", "a clean tree", "git", action="status"),
        bash("compile every module", "a syntax error would hide behind the refactor", "the marker alone",
             "python3 -m py_compile src/*.py app/*.py && echo compiled"),
        bash("measure the modules", "I want sizes to plan the split", "bytes per file", "wc -c src/*.py app/*.py"),
    ]
    steps += [read(f"src/{m}.py", f"I want the first rules of {m} again, to compare styles", "the module header",
                   start_line=1, end_line=70) for m in LEXER]
    steps += [read("src/parser.py", f"part {n} of the parser, to plan where to cut", "about sixty lines",
                   start_line=s, end_line=s + 59) for n, s in enumerate((1, 61, 121, 181, 241), 1)]
    steps += [read("src/inventory.py", "the inventory module is small enough to read whole", "short functions")]
    questions = [
        ask("definition-line", "On which line of src/parser.py is parse_header defined?",
            r"parser\.py:(\d+):\s*def parse_header", "parse_header"),
        ask("function-count", "How many top-level functions does src/inventory.py define, as the count printed?",
            r"functions: (\d+)", "functions"),
        ask("timeout-constant", "What is the value of TIMEOUT_SECONDS in app/settings.py?", r"TIMEOUT_SECONDS = (\d+)",
            "TIMEOUT_SECONDS"),
        ask("commit-hash", "What is the abbreviated hash of the commit 'Add retry budget per tenant'?",
            r"([0-9a-f]{7,12})\s+Add retry budget per tenant", "retry budget"),
        control("dropped-commit", "What is the abbreviated hash of the commit 'Drop the legacy tenant cache'?",
                r"([0-9a-f]{7,12})\s+Drop the legacy tenant cache", "legacy tenant cache"),
    ]
    return {"name": "parser-refactor", "files": files, "steps": steps, "questions": questions, "commits": commits}


TASKS: list[dict[str, Any]] = [checkout_incident(), orders_import(), parser_refactor()]
