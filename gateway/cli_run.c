/* placeholder: being written */
#include "gateway_int.h"
int gw_cmd_run(int argc, char **argv) { (void)argc; (void)argv; return EXIT_RUNTIME; }
