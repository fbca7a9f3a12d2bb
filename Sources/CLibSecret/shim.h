#include <libsecret/secret.h>

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
