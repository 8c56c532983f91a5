// The default main of a test executable (meson's 'catch' main in tests/meson.build).
#include "support/catch_session.h"

int main(int argc, char* argv[]) { return graft::test::run_catch_session(argc, argv); }
