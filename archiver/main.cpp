// timewarp-archiver: reads request lines on stdin, archives each item into the backup root,
// and writes one response line per request on stdout (ARCHITECTURE.md, "Requests and
// answers"; archive/FORMAT.md, "The archiver process"). Logs go to stderr only. The whole
// program is program_main() (program.hpp), here with no test hooks.
#include "archiver/program.hpp"

int main(int argc, char** argv) { return tw::archiver::program_main(argc, argv); }
