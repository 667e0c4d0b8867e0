#include "reference/reference.h"
