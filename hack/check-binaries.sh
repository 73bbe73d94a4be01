#!/usr/bin/env bash
# Fails when git tracks a compiled binary: an ELF, Mach-O (thin or fat) or PE
# executable or object, recognised by its first bytes, whatever its name.
# Scripts and every other file pass. Built binaries belong in bin/ (ignored),
# never in git.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

found=0
while IFS= read -r -d '' file; do
	[[ -f $file && ! -L $file ]] || continue
	magic=$(head -c 4 -- "$file" | od -An -tx1 | tr -d ' \n')
	case $magic in
	7f454c46) kind=ELF ;;
	feedface | feedfacf | cefaedfe | cffaedfe | cafebabe | bebafeca) kind=Mach-O ;;
	4d5a*) kind=PE ;;
	*) continue ;;
	esac
	echo "tracked compiled binary ($kind): $file"
	found=1
done < <(git ls-files -z)
if ((found)); then
	echo "remove it from git (git rm --cached FILE) and ignore it; built binaries go to bin/"
	exit 1
fi
