// An environment for code that reads variables through a getenv-like
// function (LaunchRanksFromEnvironment, LaunchedHostPorts), made of
// "NAME=value" strings instead of this process's environment.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pstrain::test {

inline std::function<const char*(const char*)> Env(std::vector<std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>();
  for (const std::string& v : vars) (*held)[v.substr(0, v.find('='))] = v.substr(v.find('=') + 1);
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace pstrain::test
