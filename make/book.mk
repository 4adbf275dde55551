# Book targets; the main Makefile includes this file and defines VENV, PY and the
# $(VENV)/.installed stamp (venv + requirements.txt).
#
#   make book        build _build/html; any Sphinx/myst-nb warning fails the build
#   make book-clean  remove _build entirely (the next build re-executes every notebook)
#   make vendor      re-fetch the pinned offline JS into book/_vendor/dist (npm registry)

JB ?= $(VENV)/bin/jupyter-book
# --all re-reads every page (Sphinx only re-emits a warning when it reads the page, so
# an incremental -W build can pass over a page that still warns); notebooks are still
# executed only when their code changed (execute_notebooks: cache in _config.yml).
# -n: broken cross-references are warnings too; --keep-going: list them all, then fail.
BOOK_FLAGS ?= -W -n --keep-going --all

.PHONY: book book-clean vendor

# _build/html is removed first: Sphinx never deletes the page of a document that left
# the toc. The execution cache (_build/.jupyter_cache) stays while the package does: it is keyed on a page's
# own code, so a page cell that calls synclab (chapter 2's opening figure) kept an older figure after synclab changed;
# the cache goes whenever a file of the package is newer than it.
# The book shows what the solution notebooks stored (figures, counts, tables): without solutions/ (a students' install,
# a learner's clone that removed it) there is nothing to show, said plainly rather than as 32 Sphinx warnings.
book: $(VENV)/.installed
	@[ -d solutions ] && ls solutions/*.ipynb >/dev/null 2>&1 || { echo "make book: the book is built from solutions/*.ipynb (it shows the figures and counts they stored), and this checkout has none: restore them (git checkout -- solutions) or read the published book"; exit 1; }
	rm -rf _build/html
	@[ ! -d _build/.jupyter_cache ] || [ -z "$$(find synclab -name '*.py' -newer _build/.jupyter_cache -print -quit)" ] \
		|| { echo "the package changed since the pages' code cells ran: running them again"; rm -rf _build/.jupyter_cache; }
	SYNCLAB_BOOK_BUILD=1 $(JB) build . $(BOOK_FLAGS)

book-clean:
	rm -rf _build

vendor:
	bash book/_vendor/fetch.sh
