/* The sandbox state (core/sandbox.h): one definition, no dependencies. */
#include "core/sandbox.h"

struct ms_sandbox ms_sandbox;
