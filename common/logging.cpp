#include "common/logging.hpp"

#include <regex>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tw {

void setup_logging(const std::string& program, const Config& config) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!config.log_file.empty()) {
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(config.log_file));
  }
  auto logger = std::make_shared<spdlog::logger>(program, sinks.begin(), sinks.end());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %n[%P] %l: %v");
  logger->set_level(spdlog::level::from_str(config.log_level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

std::string mask_conninfo(const std::string& conninfo) {
  // key=value form: password=secret or password='se cret'
  static const std::regex kv(R"((password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+))", std::regex::icase);
  // URI form: postgresql://user:secret@host/...
  static const std::regex uri(R"(^(postgres(?:ql)?://[^:/@]*:)[^@]*@)", std::regex::icase);
  // URI query parameter: ?password=secret
  static const std::regex query(R"(([?&]password=)[^&]*)", std::regex::icase);
  std::string masked = std::regex_replace(conninfo, kv, "$1*****");
  masked = std::regex_replace(masked, uri, "$1*****@");
  return std::regex_replace(masked, query, "$1*****");
}

}  // namespace tw
