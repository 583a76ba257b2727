/* Tesseract wrapper. */
#include "engine/ocr.h"

#include <tesseract/capi.h>

const char *ocr_tesseract_version(void) { return TessVersion(); }
