/* test_tokens.c: the tokens file's parser (every malformed line named, never its token), the
 * check of Authorization headers against a loaded file, and a reload. Single-threaded. */
#include "server/tokens.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define ALICE "0123456789abcdef0123456789abcdef"
#define ROOT "Zz-9_+/=.~!@#$%^&*()[]{}<>?|:;,x"

static void test_parse_ok(void **state)
{
    const char *text = "# comment\n\n  # indented comment\nalice " ALICE "\r\nops\t" ROOT "  admin\n";
    struct gr_token_table *t;
    struct gr_err e = {0};
    assert_int_equal(gr_tokens_parse(text, strlen(text), &t, &e), GR_OK);
    assert_int_equal(gr_tokens_count(t), 2);
    gr_tokens_free(t);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *text;
        int line;
    } bad[] = {
        {"alice " ALICE "\nAlice " ROOT "\n", 2},            /* upper case tenant */
        {"\n\nalice\n", 3},                                  /* no token */
        {"alice short\n", 1},                                /* token too short */
        {"alice " ALICE " root\n", 1},                       /* not "admin" */
        {"alice " ALICE " admin extra\n", 1},                /* too many fields */
        {"alice " ALICE "\nbob " ALICE "\n", 2},             /* the same token twice */
        {"a-very-long-tenant-name-that-goes-on-and-on-past-sixty-four-chars " ALICE "\n", 1},
        {"alice " ALICE "\xc3\xa9\n", 1},                    /* not printable ASCII */
        {"alice " ALICE "\n\0bob " ROOT "\n", 2},            /* a NUL byte */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gr_token_table *t = (void *)1;
        struct gr_err e = {0};
        size_t len = strlen(bad[i].text);
        if (i == 8)
            len = sizeof "alice " ALICE "\n\0bob " ROOT "\n" - 1;
        assert_int_equal(gr_tokens_parse(bad[i].text, len, &t, &e), GR_EINVAL);
        assert_null(t);
        char want[32];
        snprintf(want, sizeof want, "line %d", bad[i].line);
        print_message("%zu: %s\n", i, e.msg);
        assert_non_null(strstr(e.msg, want));
        assert_null(strstr(e.msg, ALICE));
        assert_null(strstr(e.msg, "short"));
    }
    struct gr_token_table *t;
    struct gr_err e = {0};
    assert_int_equal(gr_tokens_parse("# nothing\n", 10, &t, &e), GR_EINVAL); /* no token at all */
    assert_int_equal(gr_tokens_parse("", 0, &t, &e), GR_EINVAL);
}

static void test_check_and_reload(void **state)
{
    char path[] = "/tmp/gr-tokens-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "alice " ALICE "\nops " ROOT " admin\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct gr_err e = {0};
    struct gr_principal p;
    assert_false(gr_tokens_enabled());
    assert_int_equal(gr_tokens_load(path, &e), GR_OK);
    assert_true(gr_tokens_enabled());
    assert_int_equal(gr_tokens_check("Bearer " ALICE, &p, &e), GR_OK);
    assert_string_equal(p.tenant, "alice");
    assert_false(p.admin);
    assert_int_equal(gr_tokens_check("bearer  " ROOT " ", &p, &e), GR_OK); /* scheme is case-insensitive */
    assert_string_equal(p.tenant, "ops");
    assert_true(p.admin);
    assert_int_equal(gr_tokens_check(NULL, &p, &e), GR_EUNAUTH);
    assert_int_equal(gr_tokens_check("Basic YWxpY2U6eA==", &p, &e), GR_EUNAUTH);
    assert_int_equal(gr_tokens_check("Bearer " ALICE "x", &p, &e), GR_EUNAUTH);
    assert_int_equal(gr_tokens_check("Bearer ", &p, &e), GR_EUNAUTH);
    assert_null(strstr(e.msg, ALICE));

    /* a reload that fails keeps the tokens in use; one that works replaces them all */
    FILE *f = fopen(path, "w");
    fputs("alice\n", f);
    fclose(f);
    assert_int_equal(gr_tokens_load(path, &e), GR_EINVAL);
    assert_int_equal(gr_tokens_check("Bearer " ALICE, &p, &e), GR_OK);
    f = fopen(path, "w");
    fputs("ops " ROOT " admin\n", f);
    fclose(f);
    assert_int_equal(gr_tokens_load(path, &e), GR_OK);
    assert_int_equal(gr_tokens_check("Bearer " ALICE, &p, &e), GR_EUNAUTH);
    assert_int_equal(gr_tokens_check("Bearer " ROOT, &p, &e), GR_OK);
    unlink(path);
    assert_int_equal(gr_tokens_load(path, &e), GR_EIO);
    gr_tokens_unload();
    assert_false(gr_tokens_enabled());
}

static void test_tenant_names(void **state)
{
    assert_true(gr_tenant_valid("a"));
    assert_true(gr_tenant_valid("team-7_x"));
    assert_false(gr_tenant_valid(""));
    assert_false(gr_tenant_valid("Team"));
    assert_false(gr_tenant_valid("a b"));
    char longest[66];
    memset(longest, 'a', 65);
    longest[65] = 0;
    assert_false(gr_tenant_valid(longest));
    longest[64] = 0;
    assert_true(gr_tenant_valid(longest));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_check_and_reload),
        cmocka_unit_test(test_tenant_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
