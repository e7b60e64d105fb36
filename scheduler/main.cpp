// timewarp-scheduler: started by timewarp-monitor, driven by one-line signals on stdin.
#include "scheduler/program.hpp"

int main(int argc, char** argv) { return tw::scheduler::program_main(argc, argv); }
