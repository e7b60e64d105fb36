#include "cli/help.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/mask_conninfo.hpp"
#include "common/version.hpp"

namespace tw::cli {
namespace {

// The top-level help leads with the subcommands, then the few options of its own; each
// subcommand keeps CLI11's own layout.
class LeadWithSubcommands : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (app->get_parent() != nullptr || mode != CLI::AppFormatMode::Normal) {
      return CLI::Formatter::make_help(app, std::move(name), mode);
    }
    return make_description(app) + make_usage(app, std::move(name)) + make_subcommands(app, mode) +
           make_groups(app, mode) + "\n" + make_footer(app);
  }
};

// One example per subcommand, shown at the foot of its help (where it has none of its own).
constexpr std::pair<std::string_view, std::string_view> kExamples[] = {
    {"migrate", "timewarp migrate"},
    {"enqueue", "timewarp enqueue ~/Documents"},
    {"status", "timewarp status --watch"},
    {"history", "timewarp history ~/notes.txt"},
    {"failed", "timewarp failed --limit 20"},
    {"retry", "timewarp retry --all-failed"},
    {"prune", "timewarp prune --older-than 86400"},
    {"versions", "timewarp versions ~/notes.txt"},
    {"restore", "timewarp restore ~/notes --at 2026-11-26T10:00 --to /tmp/notes-then"},
    {"verify", "timewarp verify"},
    {"check", "timewarp check --content ~/Documents"},
    {"forget", "timewarp forget --dry-run"},
    {"gc", "timewarp gc"},
    {"pin", "timewarp pin ~/thesis.tex --version 12"},
    {"purge", "timewarp purge ~/.ssh/id_ed25519"},
    {"ship", "timewarp ship --json"},
    {"archivers", "timewarp archivers 4"},
    {"help", "timewarp help config"},
    {"config", "timewarp config"},
};

// The subcommand of `app` called `name`, or nullptr.
CLI::App* subcommand(CLI::App& app, std::string_view name) {
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    if (command->get_name() == name) return command;
  }
  return nullptr;
}

void add_examples(CLI::App& app) {
  for (const auto& [name, example] : kExamples) {
    CLI::App* command = subcommand(app, name);
    if (command == nullptr || !command->get_footer().empty()) continue;
    command->footer(fmt::format("Example: {}", example));
  }
}

int run_help(CLI::App& app, const std::string& topic) {
  if (topic.empty()) {
    std::cout << app.help();
  } else if (topic == "config") {
    std::cout
        << "Configuration keys. Each is a key of the configuration file (TOML), a flag and an\n"
           "environment variable; a flag wins over the environment, which wins over the file.\n"
           "`timewarp config` shows the file read and where each value came from.\n\n"
        << config_keys_text();
  } else if (const CLI::App* command = subcommand(app, topic)) {
    std::cout << command->help();
  } else {
    std::cerr << fmt::format(
        "timewarp help: no topic '{}' (try 'config' or a subcommand: timewarp --help lists them)\n",
        topic);
    return 2;
  }
  return 0;
}

// Where the configuration came from, as `config` prints it.
std::string file_line(const Config& config) {
  if (!config.config_file.empty()) return "configuration file: " + config.config_file;
  return "configuration file: none (looked for TIMEWARP_CONFIG, ./.timewarp.toml, "
         "~/.config/timewarp/timewarp.toml, /etc/timewarp/timewarp.toml)";
}

std::string shown_value(const ConfigKey& key, const Config& config) {
  const std::string value = key_value(key, config);
  if (key.secret) return value.empty() || value == "\"\"" ? value : "(set, not shown)";
  return key.name == "database" ? mask_conninfo(value, value) : value;
}

int run_config(const Config& config, bool json) {
  if (json) {
    nlohmann::ordered_json keys = nlohmann::ordered_json::object();
    for (const ConfigKey& key : config_keys()) {
      const auto origin = config.key_origins.find(key.name);
      keys[std::string(key.name)] = {
          {"value", shown_value(key, config)},
          {"from", origin == config.key_origins.end() ? "default" : origin->second}};
    }
    nlohmann::ordered_json doc = {
        {"version", kVersion},
        {"config_file", config.config_file.empty() ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(config.config_file)},
        {"keys", std::move(keys)}};
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << file_line(config) << "\n\n";
  std::cout << fmt::format("{:<22} {:<40} {}\n", "KEY", "VALUE", "FROM");
  for (const ConfigKey& key : config_keys()) {
    const auto origin = config.key_origins.find(key.name);
    std::cout << fmt::format("{:<22} {:<40} {}\n", key.name, shown_value(key, config),
                             origin == config.key_origins.end() ? "default" : origin->second);
  }
  return 0;
}

}  // namespace

void add_help_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto topic = std::make_shared<std::string>();
  auto* help = app.add_subcommand("help", "this help, a subcommand's, or 'config': every key");
  help->add_option("TOPIC", *topic, "config, or a subcommand");
  help->callback([&app, &run, topic] { run = [&app, topic] { return run_help(app, *topic); }; });

  auto json = std::make_shared<bool>(false);
  auto* shown = app.add_subcommand("config",
                                   "the configuration file read and each key's value, "
                                   "with where it came from");
  shown->fallthrough();
  shown->add_flag("--json", *json, "one JSON document");
  shown->callback(
      [&config, &run, json] { run = [&config, json] { return run_config(config, *json); }; });

  for (CLI::Option* option : app.get_options()) {
    if (option->get_group() == kConfigGroup) option->group("");
  }
  app.footer(
      "Every configuration key (backup_root, database, ...) is also a flag of every subcommand:\n"
      "timewarp help config lists them; timewarp config shows the values in use.");
  app.formatter(std::make_shared<LeadWithSubcommands>());
  add_examples(app);
}

}  // namespace tw::cli
