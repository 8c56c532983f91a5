// <graft/graft.h> in the source tree. An installed graft puts the umbrella header there (API.md);
// here it is the repository's graft.h, so samples written as a user writes them (the README's,
// which samples/check_readme.py keeps byte for byte) build in the project too.
#pragma once
#include <graft.h>
