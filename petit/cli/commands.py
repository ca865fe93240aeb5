"""The `petit` command line: run, chat, serve, info, convert, embed, train, finetune, export and verify (`petit
--version`; also `python -m petit` and `python -m petit.cli`). One module per command (run.py, chat.py, serve.py,
info.py, convert.py, embed.py); train, finetune, export and verify come from the trainer package, which only this
package imports.

Exit codes, the same for every command: 0 success; 1 a runtime error (a missing, unreadable or corrupt file, a
model that refuses the input, training that diverged); 2 a usage error (an unknown flag, a value out of range,
flags that contradict each other: petit.cli.argtypes.UsageError, or argparse's own); 130 stopped by Ctrl+C.
`petit verify` answers a question, so it follows diff(1): 0 VERIFY PASS, 1 VERIFY FAIL, 2 any error. Errors are one
line on stderr, never a traceback.
"""
import argparse
import sys
import warnings

from petit.cli.argtypes import UsageError
from petit.cli.chat import add_chat_parser
from petit.cli.convert import add_convert_parser
from petit.cli.embed import add_embed_parser
from petit.cli.info import add_info_parser
from petit.cli.run import add_run_parser
from petit.cli.serve import add_serve_parser


def build_parser() -> argparse.ArgumentParser:
    from petit import __version__
    parser = argparse.ArgumentParser(prog="petit", description="Run, train, quantize and verify small language "
                                                               "models on your CPU.")
    parser.add_argument("--version", action="version", version=f"petit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_run_parser(sub)
    add_chat_parser(sub)
    add_serve_parser(sub)               # petit/server/ (needs starlette and uvicorn, imported when it runs)
    add_info_parser(sub)
    add_convert_parser(sub)
    add_embed_parser(sub)               # issue 35: embedding models
    _add_trainer_commands(sub)
    return parser


def _add_trainer_commands(sub) -> None:
    """train / export / verify live in the trainer package, installed beside petit."""
    from trainer.cli import add_train_parser
    from trainer.export import add_export_parser
    from trainer.lora.cli import add_finetune_parser
    from trainer.verify import add_verify_parser
    add_train_parser(sub)
    add_finetune_parser(sub)
    add_export_parser(sub)
    add_verify_parser(sub)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"petit: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)       # wrong flags: usage on stderr, exit 2
    warnings.showwarning = _one_line_warning
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except UsageError as e:              # as argparse reports a bad flag, with its exit code
        print(f"petit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        print(f"petit {args.command}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:               # a bug of ours: still one line, with what a bug report needs
        print(f"petit {args.command}: internal error: {type(e).__name__}: {e} (please report this)", file=sys.stderr)
        return 1
