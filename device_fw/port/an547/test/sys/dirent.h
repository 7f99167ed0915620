/* newlib's <dirent.h> takes its types from <sys/dirent.h>, which newlib leaves out for bare
 * metal: this is it for the C unit tests on the an547 (semihosting cannot list a directory).
 * Only scandir() and alphasort() exist; scandir() lists the names make found in the
 * directory when it built the test (HB_AN547_DIR_NAMES, colon-separated) that exist there
 * now; test_support.c implements them. */
#ifndef HB_AN547_TEST_DIRENT_H
#define HB_AN547_TEST_DIRENT_H

typedef struct hb_an547_dir DIR; /* opendir() and the rest are declared, never defined */

struct dirent {
    char d_name[256];
};

#endif /* HB_AN547_TEST_DIRENT_H */
