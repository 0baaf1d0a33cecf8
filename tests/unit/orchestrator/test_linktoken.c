/* test_linktoken.c: the web page's link tokens (orchestrator/linktoken.c):
 * a token reads as its uid until it expires; an altered uid, expiry or
 * signature, a malformed token and one signed with another key are
 * refused, each saying why. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "orchestrator/linktoken.h"
#include "tests/unit/unit.h"

static void test_roundtrip (void)
{
    char tok[LINKTOKEN_MAX];
    uid_t uid = 0;
    dt_error_t err;

    CU_ASSERT_EQUAL_FATAL (linktoken_init (&err), 0);
    CU_ASSERT_EQUAL_FATAL (linktoken_make (1234, 1000, 60, tok), 0);
    CU_ASSERT_TRUE (linktoken_is (tok));
    CU_ASSERT_EQUAL (strncmp (tok, "dtui1.1234.1060.", 16), 0);
    CU_ASSERT_EQUAL (linktoken_check (tok, 1000, &uid, &err), 0);
    CU_ASSERT_EQUAL (uid, 1234);
    CU_ASSERT_EQUAL (linktoken_check (tok, 1059, &uid, &err), 0);
    /* expired at its expiry */
    CU_ASSERT_EQUAL (linktoken_check (tok, 1060, &uid, &err), -1);
    CU_ASSERT_EQUAL (errno, EACCES);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "expired at 1970-01-01T00:17:40Z"));
}

static void test_tampered (void)
{
    char tok[LINKTOKEN_MAX], bad[LINKTOKEN_MAX];
    uid_t uid = 77;
    dt_error_t err;

    CU_ASSERT_EQUAL_FATAL (linktoken_init (&err), 0);
    CU_ASSERT_EQUAL_FATAL (linktoken_make (1234, 1000, 60, tok), 0);
    /* another uid */
    snprintf (bad, sizeof (bad), "dtui1.1235.%s", tok + 11);
    CU_ASSERT_EQUAL (linktoken_check (bad, 1000, &uid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "bad signature"));
    /* a later expiry */
    snprintf (bad, sizeof (bad), "dtui1.1234.9060.%s", tok + 16);
    CU_ASSERT_EQUAL (linktoken_check (bad, 1000, &uid, &err), -1);
    /* one hex digit of the signature */
    strcpy (bad, tok);
    bad[strlen (bad) - 1] = bad[strlen (bad) - 1] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL (linktoken_check (bad, 1000, &uid, &err), -1);
    /* malformed */
    CU_ASSERT_EQUAL (linktoken_check ("dtui1.x", 1000, &uid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "malformed"));
    CU_ASSERT_EQUAL (linktoken_check ("dtui1.1.2.abc", 1000, &uid, &err), -1);
    CU_ASSERT_FALSE (linktoken_is ("0123abcd"));
    CU_ASSERT_FALSE (linktoken_is (NULL));
    /* a new key (a restart) revokes it */
    CU_ASSERT_EQUAL_FATAL (linktoken_init (&err), 0);
    CU_ASSERT_EQUAL (linktoken_check (tok, 1000, &uid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err.text, "bad signature"));
    CU_ASSERT_EQUAL (uid, 77); /* untouched on failure */
}

static const struct dt_unit_test tests[] = {
    { "make and check", test_roundtrip },
    { "tampered, malformed, revoked", test_tampered },
    { NULL, NULL },
};

int main (void)
{
    return dt_unit_run ("linktoken", tests);
}
