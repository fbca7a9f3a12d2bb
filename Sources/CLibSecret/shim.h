// The part of libsecret's and GLib's C API that PrefsKeyring calls, declared here rather than by including
// <libsecret/secret.h>. That header needs GLib's include folders, which only pkg-config knows, and GLib's pkg-config
// flags carry `-pthread`, which SwiftPM refuses with "warning: prohibited flag(s): -pthread" in every build of every
// package that uses PrefsKeyring. These declarations follow libsecret 0.18+ and GLib 2.44+, whose ABI is stable;
// Tests/PrefsKeyringTests/KeyringShimTests.swift compiles a program against the real headers and checks every
// constant and struct layout below against them.

#include <stddef.h>

typedef char gchar;
typedef int gint;
typedef int gboolean;
typedef unsigned int guint;
typedef unsigned int GQuark;
typedef unsigned long gsize;
typedef signed long gssize;
typedef gsize GType;
typedef void *gpointer;
typedef const void *gconstpointer;
typedef void (*GDestroyNotify)(gpointer data);
typedef guint (*GHashFunc)(gconstpointer key);
typedef gboolean (*GEqualFunc)(gconstpointer a, gconstpointer b);

typedef struct _GError {
    GQuark domain;
    gint code;
    gchar *message;
} GError;

typedef struct _GList GList;
struct _GList {
    gpointer data;
    GList *next;
    GList *prev;
};

typedef struct _GHashTable GHashTable;
typedef struct _GDBusConnection GDBusConnection;
typedef struct _SecretValue SecretValue;

// Instances of GObject classes: Swift passes pointers to them and never reads their fields.
typedef struct _GObject {
    gpointer g_type_instance;
    guint ref_count;
    gpointer qdata;
} GObject;
typedef struct _GCancellable {
    GObject parent_instance;
    gpointer priv;
} GCancellable;
typedef struct _GDBusProxy {
    GObject parent_instance;
    gpointer priv;
} GDBusProxy;
typedef struct _SecretService {
    GDBusProxy parent;
    gpointer pv;
} SecretService;
typedef struct _SecretCollection {
    GDBusProxy parent;
    gpointer pv;
} SecretCollection;
typedef struct _SecretItem {
    GDBusProxy parent_instance;
    gpointer pv;
} SecretItem;

typedef enum { G_BUS_TYPE_SESSION = 2 } GBusType;
typedef enum { SECRET_SERVICE_NONE = 0, SECRET_SERVICE_OPEN_SESSION = 1 << 1 } SecretServiceFlags;
typedef enum { SECRET_COLLECTION_NONE = 0 } SecretCollectionFlags;
typedef enum { SECRET_ITEM_CREATE_NONE = 0 } SecretItemCreateFlags;
typedef enum { SECRET_SEARCH_NONE = 0, SECRET_SEARCH_ALL = 1 << 1 } SecretSearchFlags;
typedef enum { SECRET_ERROR_IS_LOCKED = 2 } SecretError;
typedef enum {
    G_IO_ERROR_CLOSED = 18,
    G_IO_ERROR_CANCELLED = 19,
    G_IO_ERROR_TIMED_OUT = 24,
    G_IO_ERROR_BROKEN_PIPE = 44,
    G_IO_ERROR_CONNECTION_CLOSED = 44,
} GIOErrorEnum;
typedef enum {
    G_DBUS_ERROR_SERVICE_UNKNOWN = 2,
    G_DBUS_ERROR_NAME_HAS_NO_OWNER = 3,
    G_DBUS_ERROR_NO_REPLY = 4,
    G_DBUS_ERROR_NO_SERVER = 11,
    G_DBUS_ERROR_TIMEOUT = 12,
    G_DBUS_ERROR_DISCONNECTED = 15,
    G_DBUS_ERROR_TIMED_OUT = 20,
    G_DBUS_ERROR_SPAWN_EXEC_FAILED = 23,
    G_DBUS_ERROR_SPAWN_FORK_FAILED = 24,
    G_DBUS_ERROR_SPAWN_CHILD_EXITED = 25,
    G_DBUS_ERROR_SPAWN_CHILD_SIGNALED = 26,
    G_DBUS_ERROR_SPAWN_FAILED = 27,
    G_DBUS_ERROR_SPAWN_SERVICE_INVALID = 30,
    G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND = 31,
    G_DBUS_ERROR_SPAWN_FILE_INVALID = 33,
} GDBusError;

typedef enum { SECRET_SCHEMA_NONE = 0, SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1 } SecretSchemaFlags;
typedef enum { SECRET_SCHEMA_ATTRIBUTE_STRING = 0 } SecretSchemaAttributeType;
typedef struct {
    const gchar *name;
    SecretSchemaAttributeType type;
} SecretSchemaAttribute;
typedef struct {
    const gchar *name;
    SecretSchemaFlags flags;
    SecretSchemaAttribute attributes[32];
    gint reserved;
    gpointer reserved1;
    gpointer reserved2;
    gpointer reserved3;
    gpointer reserved4;
    gpointer reserved5;
    gpointer reserved6;
    gpointer reserved7;
} SecretSchema;

// GLib
void g_free(gpointer mem);
gchar *g_strdup(const gchar *text);
guint g_str_hash(gconstpointer v);
gboolean g_str_equal(gconstpointer v1, gconstpointer v2);
void g_error_free(GError *error);
GList *g_list_append(GList *list, gpointer data);
void g_list_free(GList *list);
void g_list_free_full(GList *list, GDestroyNotify free_func);
GHashTable *g_hash_table_new_full(
    GHashFunc hash_func, GEqualFunc key_equal_func, GDestroyNotify key_destroy_func, GDestroyNotify value_destroy_func);
gboolean g_hash_table_insert(GHashTable *hash_table, gpointer key, gpointer value);
void g_hash_table_unref(GHashTable *hash_table);
// GObject and GIO
gpointer g_object_ref(gpointer object);
void g_object_unref(gpointer object);
GCancellable *g_cancellable_new(void);
void g_cancellable_cancel(GCancellable *cancellable);
GQuark g_io_error_quark(void);
GQuark g_dbus_error_quark(void);
GDBusConnection *g_bus_get_sync(GBusType bus_type, GCancellable *cancellable, GError **error);
void g_dbus_connection_set_exit_on_close(GDBusConnection *connection, gboolean exit_on_close);
const gchar *g_dbus_proxy_get_object_path(GDBusProxy *proxy);
// libsecret
GQuark secret_error_get_quark(void);
GType secret_service_get_type(void);
SecretService *secret_service_open_sync(
    GType service_gtype, const gchar *service_bus_name, SecretServiceFlags flags, GCancellable *cancellable,
    GError **error);
GList *secret_service_search_sync(
    SecretService *service, const SecretSchema *schema, GHashTable *attributes, SecretSearchFlags flags,
    GCancellable *cancellable, GError **error);
gint secret_service_unlock_sync(
    SecretService *service, GList *objects, GCancellable *cancellable, GList **unlocked, GError **error);
SecretCollection *secret_collection_for_alias_sync(
    SecretService *service, const gchar *alias, SecretCollectionFlags flags, GCancellable *cancellable,
    GError **error);
gboolean secret_collection_get_locked(SecretCollection *self);
SecretItem *secret_item_create_sync(
    SecretCollection *collection, const SecretSchema *schema, GHashTable *attributes, const gchar *label,
    SecretValue *value, SecretItemCreateFlags flags, GCancellable *cancellable, GError **error);
gboolean secret_item_get_locked(SecretItem *self);
gboolean secret_item_load_secret_sync(SecretItem *self, GCancellable *cancellable, GError **error);
SecretValue *secret_item_get_secret(SecretItem *self);
gboolean secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error);
SecretValue *secret_value_new(const gchar *secret, gssize length, const gchar *content_type);
const gchar *secret_value_get(SecretValue *value, gsize *length);
void secret_value_unref(gpointer value);

// Swift cannot build a SecretSchema (a fixed array of 32 attributes) or call the variadic libsecret functions, so
// the schema of Prefs' vault keys and its attribute table are made here.

// The schema of a vault key's item: the app and the vault file it belongs to. libsecret adds the schema's name as
// the attribute xdg:schema, so `secret-tool search xdg:schema org.prefs.VaultKey` lists every Prefs vault key.
static inline const SecretSchema *prefs_vault_key_schema(void) {
    static const SecretSchema schema = {
        "org.prefs.VaultKey",
        SECRET_SCHEMA_NONE,
        {
            {"application", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {"vault", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {NULL, 0},
        },
    };
    return &schema;
}

// The same attributes for a search, without the schema's name: GNOME Keyring matches a locked collection's items by
// their attributes but not by xdg:schema, so a search that bound the name would answer "no item" for a locked key.
static inline const SecretSchema *prefs_vault_key_search_schema(void) {
    static const SecretSchema schema = {
        "org.prefs.VaultKey",
        SECRET_SCHEMA_DONT_MATCH_NAME,
        {
            {"application", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {"vault", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {NULL, 0},
        },
    };
    return &schema;
}

// The attributes that find a vault's key again; free with g_hash_table_unref.
static inline GHashTable *prefs_vault_key_attributes(const char *application, const char *vault) {
    GHashTable *attributes = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    g_hash_table_insert(attributes, (gpointer) "application", g_strdup(application));
    g_hash_table_insert(attributes, (gpointer) "vault", g_strdup(vault));
    return attributes;
}

// Frees a list of GObjects (the items a search returned, the objects an unlock unlocked).
static inline void prefs_free_object_list(GList *list) {
    g_list_free_full(list, g_object_unref);
}
