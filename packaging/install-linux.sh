#!/bin/sh
# Install the Petit folder bundle (the folder this script is in, built by `python build_app.py`) for the current
# user: the folder goes to ~/.local/opt/Petit, the `Petit` command to ~/.local/bin, the menu entry and its icon to
# ~/.local/share. No root needed; PREFIX=/usr/local (as root) installs for everyone. `--uninstall` removes it all.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-$HOME/.local}
DEST="$PREFIX/opt/Petit"
APPS="$PREFIX/share/applications"
ICONS="$PREFIX/share/icons/hicolor"

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$DEST"
    rm -f "$PREFIX/bin/Petit" "$APPS/petit.desktop" "$ICONS/scalable/apps/petit.svg" "$ICONS/256x256/apps/petit.png"
    echo "Petit removed from $PREFIX"
    exit 0
fi
[ -x "$HERE/Petit" ] || { echo "install-linux.sh: $HERE/Petit not found: run me from the built dist/Petit/ folder" >&2; exit 1; }

if [ "$HERE" != "$DEST" ]; then
    mkdir -p "$PREFIX/opt"
    rm -rf "$DEST"
    cp -a "$HERE" "$DEST"
fi
mkdir -p "$PREFIX/bin" "$APPS" "$ICONS/scalable/apps" "$ICONS/256x256/apps"
ln -sf "$DEST/Petit" "$PREFIX/bin/Petit"
cp "$DEST/petit.svg" "$ICONS/scalable/apps/petit.svg"
cp "$DEST/petit.png" "$ICONS/256x256/apps/petit.png"
sed "s|^Exec=.*|Exec=\"$DEST/Petit\" %f|" "$DEST/petit.desktop" > "$APPS/petit.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$APPS" || true
command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$ICONS" 2>/dev/null || true
echo "Petit installed in $DEST; it is in your applications menu, and \`Petit\` runs it from a terminal"
echo "(make sure $PREFIX/bin is on your PATH). Check it with: Petit --smoke-test"
