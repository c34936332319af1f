/* policy/err.c: error code names. */
#include "aagw_base.h"

const char *aagw_err2str(aagw_err_t err) {
        switch (err) {
        case AAGW_OK:
                return "success";
        case AAGW_ERR_CONFIG:
                return "configuration error";
        case AAGW_ERR_STORE:
                return "state store error";
        case AAGW_ERR_KAFKA:
                return "Kafka error";
        case AAGW_ERR_NOMEM:
                return "out of memory";
        case AAGW_ERR_BUSY:
                return "resource busy";
        case AAGW_ERR_INVAL:
                return "invalid argument";
        case AAGW_ERR_NOENT:
                return "not found";
        case AAGW_ERR_TIMEOUT:
                return "timed out";
        case AAGW_ERR_UNSUPPORTED:
                return "not supported by the peer";
        }
        return "unknown error";
}
