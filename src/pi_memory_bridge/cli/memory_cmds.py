"""The terminal side of "see and edit what it knows": `list`, `show`, `search`, `edit`, `export`,
`import`, `status`, `pause`/`resume`, `install-sdk`, and `forget`/`outbox purge` for scripts.

Every read command takes `--json` (shapes in `json_shapes`, documented in README); every command
that deletes takes `--yes` (no question) and `--id` (exactly these items). End of input or Ctrl-C
ends a command with one line and changes nothing that was not already confirmed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pi_memory_bridge.backends.base import BackendError, Capability, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.cli.json_shapes import ListOut, SearchOut, SemanticOut, ShowOut, StatusOut
from pi_memory_bridge.cli.memory_args import SECTIONS
from pi_memory_bridge.commands.memory_flow import edit_item
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir, load_config
from pi_memory_bridge.operations import memory_view as view
from pi_memory_bridge.operations.forget import ForgetDeps, find_candidates, forget_chosen
from pi_memory_bridge.operations.memory_export import (
    ExportFile,
    export_markdown,
    export_memory,
    import_memory,
    item_json,
    preview_import,
)
from pi_memory_bridge.operations.pause import set_paused
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.plural import counted
from pi_memory_bridge.project import project_of
from pi_memory_bridge.recall.engine import build_query
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.tools.search_report import semantic_state
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

Ask = Callable[[str], str]


def _load() -> tuple[LoadedConfig, Path]:
    agent_dir = default_agent_dir(os.environ)
    return load_config(agent_dir=agent_dir, cwd=Path.cwd(), project_trusted=False, env=os.environ), agent_dir


def _print_json(model: BaseModel) -> None:
    print(json.dumps(model.model_dump(mode="json", by_alias=True), ensure_ascii=False, indent=2))


def _err(text: str) -> int:
    print(redact_text(text).text, file=sys.stderr)
    return 1


async def _with_backend(work: Callable[[MemoryBackend], Awaitable[int]]) -> int:
    loaded, agent_dir = _load()
    try:
        backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
    except (BackendError, OSError) as exc:
        return _err(f"memory store unavailable: {exc}")
    try:
        return await work(backend)
    except BackendError as exc:
        return _err(f"memory store failed: {exc}")
    finally:
        await backend.close()


def _run(work: Callable[[MemoryBackend], Awaitable[int]]) -> int:
    return asyncio.run(_with_backend(work))


# --- reads ---------------------------------------------------------------------------------------


async def _list(backend: MemoryBackend, args: argparse.Namespace) -> int:
    want = {args.section} if args.section != "all" else set(SECTIONS)
    limit = max(1, args.limit)
    prof = await view.profile(backend) if "profile" in want else None
    mems = await view.memories(backend, kind=args.kind, limit=limit) if "memories" in want else []
    turns = await view.conversation(backend, limit=limit) if "conversation" in want else []
    notes = await view.notes(backend) if "notes" in want else []
    if args.json:
        _print_json(ListOut(
            profile=item_json(prof) if prof else None,
            memories=[item_json(i) for i in mems],
            conversation=[item_json(i) for i in turns],
            notes=[item_json(i) for i in notes[:limit]],
        ))  # fmt: skip
        return 0
    blocks = []
    if "profile" in want:
        blocks.append(f"Profile:\n  {prof.ref}  {prof.preview()}" if prof else "Profile: none yet.")
    if "memories" in want:
        blocks.append(view.render_list("Memories", mems))
        if Capability.L1_LIST not in backend.capabilities:
            blocks.append(f"  (the {backend.name} backend cannot list memories; use `search`)")
    if "conversation" in want:
        blocks.append(view.render_list("Recent conversation", turns))
    if "notes" in want:
        blocks.append(view.render_list("Notes", notes[:limit]))
    print("\n\n".join(blocks))
    print("\n`pi-memory-bridge show REF` shows an item in full; `edit REF` corrects a memory.")
    return 0


async def _show(backend: MemoryBackend, args: argparse.Namespace) -> int:
    item = await view.find(backend, args.ref)
    if item is None:
        return _err(f"nothing in memory has the ref {args.ref!r} (see `pi-memory-bridge list`)")
    if args.json:
        _print_json(ShowOut(item=item_json(item)))
    else:
        print(item.full())
    return 0


async def _search(backend: MemoryBackend, query: str, limit: int, as_json: bool) -> int:
    # what recall would search for this text as a prompt: the results are the ones it would rank
    items = await view.search(backend, build_query(query), limit)
    recent = not query.strip()
    if as_json:
        state = semantic_state(backend)
        semantic = SemanticOut.model_validate(state, strict=False) if state is not None else None
        _print_json(
            SearchOut(query=query, recent=recent, items=[item_json(i) for i in items], semantic=semantic)
        )
        return 0
    print(view.render_list("Most recent" if recent else f"Matches for {query!r}", items))
    return 0


def search(query: str, limit: int, as_json: bool) -> int:
    return _guarded(lambda: _run(lambda b: _search(b, query, limit, as_json)))


async def _status(as_json: bool) -> int:
    from pi_memory_bridge.cli.status_report import cli_status_report
    from pi_memory_bridge.vocabulary.status import render_status

    loaded, agent_dir = _load()
    report = await cli_status_report(loaded, agent_dir, Path.cwd())
    if as_json:
        _print_json(StatusOut.model_validate(report.to_dict()))
    else:
        print(render_status(report))
    return 0 if report.healthy else 1


async def _export(backend: MemoryBackend, args: argparse.Namespace) -> int:
    data = await export_memory(backend)
    text = (
        json.dumps(data.model_dump(mode="json", by_alias=True), ensure_ascii=False, indent=2) + "\n"
        if args.json
        else export_markdown(data)
    )
    if args.output is None:
        sys.stdout.write(text)
        return 0
    _write_private(args.output, text)
    print(f"wrote {args.output} ({counted(len(data.memories), 'memory')}, "
          f"{counted(len(data.conversation), 'turn')}, {counted(len(data.notes), 'note')})")  # fmt: skip
    return 0


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


# --- writes --------------------------------------------------------------------------------------


def _new_text(current: str, given: str | None) -> str | None:
    if given is not None:
        return given
    if not sys.stdin.isatty():
        return sys.stdin.read()
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        print(f"current text:\n{current}")
        return _asked(input, "new text (empty to keep it): ")
    fd, name = tempfile.mkstemp(prefix="pi-memory-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(current + "\n")
        subprocess.run([*shlex.split(editor), name], check=False)
        return Path(name).read_text(encoding="utf-8")
    finally:
        os.unlink(name)


async def _edit(backend: MemoryBackend, args: argparse.Namespace) -> int:
    item = await view.find(backend, args.ref)
    if item is None:
        return _err(f"nothing in memory has the ref {args.ref!r} (see `pi-memory-bridge list`)")
    if not item.editable or Capability.L1_UPDATE not in backend.capabilities:
        return _err(f"{item.ref} cannot be edited here (only memories, L1, on a backend that allows it)")
    text = _new_text(item.text, args.text)
    if text is None or not text.strip():
        print("Not changed.")
        return 0
    updated, line = await edit_item(backend, item, text)
    print(line)
    return 0 if updated is not None else 1


def _asked(ask: Ask, prompt: str) -> str:
    """`ask(prompt)` with Ctrl-C raising KeyboardInterrupt, also inside the event loop (whose own
    SIGINT handler would only cancel the task once the blocking read returns)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return ask(prompt)
    finally:
        signal.signal(signal.SIGINT, previous)


def _confirm(question: str, yes: bool, ask: Ask) -> bool:
    return yes or _asked(ask, f"{question} [y/N] ").strip().lower() in ("y", "yes")


async def _import(backend: MemoryBackend, file: Path, yes: bool, ask: Ask) -> int:
    try:
        raw = await asyncio.to_thread(file.read_text, encoding="utf-8")
        data = ExportFile.model_validate_json(raw, by_alias=True)
    except OSError as exc:
        return _err(f"cannot read {file}: {exc}")
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        return _err(f"{file} is not a pi-memory-bridge export (nothing was imported): {problems}")
    print(f"{file}: {preview_import(data)}")
    if not _confirm("Import it? Existing memories, notes and the profile are kept.", yes, ask):
        print("Not confirmed: nothing was imported.")
        return 1
    report = await import_memory(backend, data)
    print("\n".join(report.lines()))
    return 1 if report.failures else 0


async def _open_delivery(agent_dir: Path) -> CaptureDelivery | None:
    try:
        return CaptureDelivery(await asyncio.to_thread(Outbox.open, data_dir(agent_dir)), lambda _c: None)
    except (BackendError, OSError) as exc:
        print(f"the outbox is unavailable, the store only: {redact_text(str(exc)).text}", file=sys.stderr)
        return None


async def _forget(backend: MemoryBackend, query: str, ids: list[str], yes: bool, ask: Ask) -> int:
    _loaded, agent_dir = _load()
    delivery = await _open_delivery(agent_dir)
    try:
        deps = ForgetDeps(
            backend,
            "",
            search_pending=delivery.search_pending if delivery else None,
            remove_pending=(lambda i: delivery.remove_pending(i, backend)) if delivery else None,
        )
        failures: list[str] = []
        if ids:
            chosen = []
            for ref in ids:
                item = await view.find(backend, ref)
                if item is None:
                    failures.append(f"FAILED  {ref}: not found")
                else:
                    chosen.append(ForgetCandidate(item.layer, item.id, item.updated_at, item.text))
        else:
            chosen, failures = await find_candidates(deps, query)
            failures = [f"! {f}" for f in failures]
        if not chosen:
            print("\n".join([*failures, "Nothing to forget."]))
            return 1 if failures else 0
        print(
            "\n".join([f"{counted(len(chosen), 'item')}:", *(f"  {c.preview()}" for c in chosen), *failures])
        )
        if not _confirm(f"Delete {counted(len(chosen), 'item')}? This cannot be undone.", yes, ask):
            print("Not confirmed: nothing was deleted.")
            return 1
        lines = await forget_chosen(deps, chosen)
        print("\n".join(lines))
        return 0 if all(line.startswith("deleted") for line in lines) and not failures else 1
    finally:
        if delivery is not None:
            await delivery.close()


def forget_scripted(query: str, ids: list[str], yes: bool, ask: Ask = input) -> int:
    return _guarded(lambda: _run(lambda b: _forget(b, query, ids, yes, ask)))


def _pause(path: Path | None, paused: bool) -> int:
    _loaded, agent_dir = _load()
    outcome = set_paused(agent_dir, project_of(path or Path.cwd()), paused)
    print(outcome.message.replace("/tdai-memory-resume", "`pi-memory-bridge resume` or /tdai-memory-resume"))
    return 0 if outcome.ok else 1


def _install_sdk(only_print: bool, yes: bool, ask: Ask) -> int:
    from pi_memory_bridge.backends.memorycore import SDK_REQUIREMENT, plan_install, sdk_available

    plan = plan_install(SDK_REQUIREMENT)
    if only_print:
        print(plan.shell())
        return 0 if plan.argv else 1
    if sdk_available():
        print("The MemoryCore SDK is already installed.")
        return 0
    if plan.argv is None:
        return _err(plan.note)
    print(f"The MemoryCore SDK is not on PyPI; this installs it from its source, pinned:\n  {plan.shell()}")
    if not _confirm("Run it?", yes, ask):
        print("Not confirmed: nothing was installed.")
        return 1
    return subprocess.run(list(plan.argv), check=False).returncode


# --- dispatch ------------------------------------------------------------------------------------


def _guarded(run: Callable[[], int]) -> int:
    """End of input and Ctrl-C end the command with one line, never a traceback."""
    try:
        return run()
    except EOFError:
        print("\nno answer (end of input): nothing more was changed", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: nothing more was changed", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def dispatch(args: argparse.Namespace, ask: Ask = input) -> int:
    """Run one of `OWN`'s commands."""
    command: str = args.command

    def run() -> int:
        if command == "list":
            return _run(lambda b: _list(b, args))
        if command == "show":
            return _run(lambda b: _show(b, args))
        if command == "edit":
            return _run(lambda b: _edit(b, args))
        if command == "export":
            return _run(lambda b: _export(b, args))
        if command == "import":
            if args.file is None:  # Pi's own session files, from before memory ran
                from pi_memory_bridge.cli.import_sessions import import_sessions

                return import_sessions(args.since, args.session, args.yes, ask)
            return _run(lambda b: _import(b, args.file, args.yes, ask))
        if command == "status":
            return asyncio.run(_status(args.json))
        if command in ("pause", "resume"):
            return _pause(args.path, command == "pause")
        return _install_sdk(args.print, args.yes, ask)

    return _guarded(run)
