/* common/fault.h, the one fault-injection registry: one grammar
 * (FOLIO_FAULT=SITE[:ARG],...), named sites, exact matches (a site is not
 * a prefix of another: "pipeline:soft" does not fault "softmax"), numeric
 * arguments, and nothing at all without -DFOLIO_FAULT_INJECTION=ON. */
#include "common/common.h"
#include "common/fault.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    CHECK(strcmp(folio_fault_name(FOLIO_FAULT_vk_oom), "vk_oom") == 0, "site name");
    unsetenv("FOLIO_FAULT");
    CHECK(!folio_fault(FOLIO_FAULT_vk_oom, NULL) && folio_fault_num(FOLIO_FAULT_device_lost) == 0, "unset: none");
    setenv("FOLIO_FAULT", "pipeline:softmax,vk_device_lost,device_lost:7,crash_on_document:ab12,sleep_ms:x,"
                          "pipeline:rope",
           1);
#ifdef FOLIO_FAULT_INJECTION
    CHECK(folio_fault_built(), "built in");
    CHECK(folio_fault(FOLIO_FAULT_vk_device_lost, NULL), "bare site");
    CHECK(!folio_fault(FOLIO_FAULT_vk_oom, NULL), "a site not named");
    CHECK(folio_fault(FOLIO_FAULT_pipeline, "softmax") && folio_fault(FOLIO_FAULT_pipeline, "rope"),
          "a site named twice with two arguments");
    CHECK(!folio_fault(FOLIO_FAULT_pipeline, "soft") && !folio_fault(FOLIO_FAULT_pipeline, "softmax2"),
          "arguments match exactly");
    CHECK(folio_fault_num(FOLIO_FAULT_device_lost) == 7, "number: %ld", folio_fault_num(FOLIO_FAULT_device_lost));
    CHECK(folio_fault_num(FOLIO_FAULT_sleep_ms) == 0, "not a number: 0");
    char arg[65];
    CHECK(folio_fault_arg(FOLIO_FAULT_crash_on_document, arg, sizeof arg) && strcmp(arg, "ab12") == 0, "arg: %s",
          arg);
    /* "device_lost" is not the tail of "vk_device_lost" */
    setenv("FOLIO_FAULT", "vk_device_lost", 1);
    CHECK(!folio_fault(FOLIO_FAULT_device_lost, NULL), "whole names only");
    /* a name that is no site is not an error: it is logged and ignored */
    setenv("FOLIO_FAULT", "vk_oon,vk_oom", 1);
    CHECK(folio_fault(FOLIO_FAULT_vk_oom, NULL), "the known site after an unknown one");
#else
    CHECK(!folio_fault_built(), "not built in");
    CHECK(!folio_fault(FOLIO_FAULT_vk_device_lost, NULL) && !folio_fault(FOLIO_FAULT_pipeline, "softmax") &&
              folio_fault_num(FOLIO_FAULT_device_lost) == 0,
          "release builds never inject");
#endif
    unsetenv("FOLIO_FAULT");
    return tu_finish();
}
