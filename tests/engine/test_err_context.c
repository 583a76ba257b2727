/* Error context on a real failure (issue 20): the text model's upload runs
 * out of device memory (FOLIO_FAULT=vk_oom, test builds). The error keeps
 * the allocator's detail, the numbers that prove the out-of-memory (free
 * memory per heap, what folio holds, the block limit), and the model code
 * adds which tensor it was uploading as context instead of writing over
 * that detail. */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/model/lm.h"
#include "engine/vk/vkr.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
#ifdef FOLIO_FAULT_INJECTION
    const char *src = getenv("FOLIO_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/parity/qwen25vl/text-Q6_K.gguf", src && *src ? src : ".");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config vc = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1, .validate = -1,
                            .cache_dir = ""};
    struct folio_err e = {0};
    struct vkr *vk = NULL;
    REQUIRE(vkr_open(&vc, &vk, &e) == 0, "vkr_open: %s", e.msg);
    struct lm *lm = NULL;
    setenv("FOLIO_FAULT", "vk_oom", 1);
    int rc = lm_open_file(vk, path, &(struct lm_config){0}, &lm, &e);
    unsetenv("FOLIO_FAULT");
    CHECK(rc == FOLIO_ENOMEM && lm == NULL, "rc %d: %s", rc, e.msg);
    CHECK(strstr(e.msg, "out of device memory") != NULL, "message: %s", e.msg);
    CHECK(strstr(e.detail, "free of") && strstr(e.detail, "block limit"), "the allocator's detail kept: %s",
          e.detail);
    CHECK(strstr(e.context, "uploading tensor ") != NULL, "context names the tensor: %s", e.context);
    lm_close(lm);
    vkr_close(vk);
#else
    fprintf(stderr, "needs -DFOLIO_FAULT_INJECTION=ON (the test is disabled without it)\n");
#endif
    return tu_finish();
}
