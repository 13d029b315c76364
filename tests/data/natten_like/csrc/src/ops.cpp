#include "tiny.h"
extern "C" int tiny_scale() { return TINY_SCALE; }
